"""Installing and upgrading Courier's schema.

The migrations in ``sql/migrations/`` are applied in file-name order, each in its own
transaction together with its row in ``courier_migrations``, so ``migrate`` is
idempotent and safe to run from several processes at once (an advisory lock
serialises them). ``sql/schema.sql`` is the readable whole of the current schema;
a test holds it equal to the sum of the migrations.
"""

from __future__ import annotations

from pathlib import Path

import asyncpg

SQL_DIR = Path(__file__).parent / "sql"
MIGRATIONS_DIR = SQL_DIR / "migrations"
SCHEMA_FILE = SQL_DIR / "schema.sql"
BOOKKEEPING_FILE = SQL_DIR / "migrations_table.sql"

MIN_SERVER_VERSION = 140000  # PostgreSQL 14

# Arbitrary but fixed: the key of the advisory lock that serialises migrators.
_MIGRATION_LOCK_KEY = 0x636F7572  # "cour"


class MigrationError(RuntimeError):
    """The schema cannot be installed on this server."""


FAILURES: tuple[type[BaseException], ...] = (
    OSError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    MigrationError,
)
"""What ``migrate`` may raise when the target refuses or cannot be reached."""


def migration_files() -> list[Path]:
    """Every migration, in the order it must be applied."""
    return sorted(MIGRATIONS_DIR.glob("*.sql"))


async def migrate(target: str | asyncpg.Connection) -> list[str]:
    """Apply the pending migrations to a DSN or an open connection.

    Returns the names of the migrations applied now (empty when up to date).
    """
    if isinstance(target, str):
        connection = await asyncpg.connect(target)
        try:
            return await _migrate(connection)
        finally:
            await connection.close()
    return await _migrate(target)


async def applied_migrations(connection: asyncpg.Connection) -> list[str]:
    """Names of the migrations already applied, in order."""
    rows = await connection.fetch("SELECT name FROM courier_migrations ORDER BY name")
    return [row["name"] for row in rows]


async def apply_schema_file(connection: asyncpg.Connection) -> None:
    """Build the schema from schema.sql alone (used to check it against the migrations)."""
    async with connection.transaction():
        await connection.execute(_read(SCHEMA_FILE))


async def _migrate(connection: asyncpg.Connection) -> list[str]:
    version = int(await connection.fetchval("SHOW server_version_num"))
    if version < MIN_SERVER_VERSION:
        raise MigrationError(f"Courier needs PostgreSQL 14 or newer; this server is {version}")
    await connection.execute("SELECT pg_advisory_lock($1)", _MIGRATION_LOCK_KEY)
    try:
        await connection.execute(_read(BOOKKEEPING_FILE))
        done = set(await applied_migrations(connection))
        applied = []
        for path in migration_files():
            if path.name not in done:
                await _apply_one(connection, path)
                applied.append(path.name)
        return applied
    finally:
        await connection.execute("SELECT pg_advisory_unlock($1)", _MIGRATION_LOCK_KEY)


async def _apply_one(connection: asyncpg.Connection, path: Path) -> None:
    async with connection.transaction():
        await connection.execute(_read(path))
        await connection.execute("INSERT INTO courier_migrations (name) VALUES ($1)", path.name)


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")
