"""The database of a benchmark run: a fresh durable embedded PostgreSQL, or a given one.

The fresh one is the lab runner's (``runner.fresh_database``: a temp dir, fsync on,
default ``synchronous_commit``, the schema migrated), with ``max_connections``
raised when the direct path needs more connections than it allows. A given DSN is
migrated (a no-op when up to date) and otherwise left as it is.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import asyncpg

from courier import errors
from courier.db import embedded, schema
from courier.lab import runner

HEADROOM = 20
"""Connections kept free for the benchmark's own setup and for administrators."""


@contextlib.asynccontextmanager
async def for_run(dsn: str | None, *, connections: int) -> AsyncIterator[tuple[str, bool]]:
    """The DSN to use and whether it is the run's own database."""
    if dsn:
        try:
            await schema.migrate(dsn)
        except (OSError, asyncpg.PostgresError) as exc:
            raise errors.Unavailable(f"cannot use the database of --dsn: {exc}") from exc
        yield dsn, False
        return
    async with runner.fresh_database(durable=True) as server:
        await allow_connections(server, connections + HEADROOM)
        yield server.dsn, True


async def allow_connections(server: embedded.EmbeddedPostgres, needed: int) -> None:
    """Raise max_connections to ``needed`` (a restart) unless it is that high already."""
    connection = await asyncpg.connect(server.dsn)
    try:
        current = int(await connection.fetchval("SHOW max_connections"))
        if current >= needed:
            return
        # ALTER SYSTEM takes no parameters; needed is an int.
        await connection.execute(f"ALTER SYSTEM SET max_connections = {int(needed)}")
    finally:
        await connection.close()
    await asyncio.to_thread(server.stop)
    await asyncio.to_thread(server.start)


async def spare_connections(dsn: str) -> tuple[int, int]:
    """(connections still free for ordinary users, max_connections)."""
    connection = await asyncpg.connect(dsn)
    try:
        row = await connection.fetchrow(
            "SELECT current_setting('max_connections')::int AS most,"
            " current_setting('superuser_reserved_connections')::int AS reserved,"
            " (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')"
            " AS used"
        )
    finally:
        await connection.close()
    return int(row["most"] - row["reserved"] - row["used"]), int(row["most"])


async def server_version(dsn: str) -> str:
    connection = await asyncpg.connect(dsn)
    try:
        return str(await connection.fetchval("SHOW server_version"))
    finally:
        await connection.close()


async def settle(dsn: str) -> None:
    """Clear what the last level left behind (dead rows), so levels start alike."""
    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute("VACUUM ANALYZE")
    finally:
        await connection.close()
