"""schema.sql is the sum of the migrations; migrate is ordered, idempotent and safe to race."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import asyncpg
import pytest

from courier.db import schema

if TYPE_CHECKING:
    from conftest import TestDatabases  # the shared fixture's type (tests/conftest.py)

# Every object of the schema, with its full definition, from pg_catalog.
CATALOG_QUERIES = {
    "columns": """
        SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
               a.attidentity, a.attgenerated, pg_get_expr(d.adbin, d.adrelid)
        FROM pg_attribute a
        JOIN pg_class c ON c.oid = a.attrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        WHERE n.nspname = 'public' AND c.relkind = 'r' AND a.attnum > 0
          AND NOT a.attisdropped AND c.relname <> 'courier_migrations'
        ORDER BY 1, 2""",
    "constraints": """
        SELECT c.relname, k.conname, pg_get_constraintdef(k.oid)
        FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relname <> 'courier_migrations'
        ORDER BY 1, 2""",
    "indexes": """
        SELECT tablename, indexname, indexdef FROM pg_indexes
        WHERE schemaname = 'public' AND tablename <> 'courier_migrations'
        ORDER BY 1, 2""",
    "functions": """
        SELECT p.proname, pg_get_function_identity_arguments(p.oid), pg_get_functiondef(p.oid)
        FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = 'public'
        ORDER BY 1, 2""",
    "triggers": """
        SELECT t.tgname, pg_get_triggerdef(t.oid)
        FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND NOT t.tgisinternal
        ORDER BY 1""",
    "table options": """
        SELECT c.relname, c.reloptions FROM pg_class c
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.relname <> 'courier_migrations'
        ORDER BY 1""",
    "sequences": """
        SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relkind = 'S' ORDER BY 1""",
}


async def catalog(dsn: str) -> dict[str, list[tuple[object, ...]]]:
    connection = await asyncpg.connect(dsn)
    try:
        return {
            name: [tuple(row) for row in await connection.fetch(query)]
            for name, query in CATALOG_QUERIES.items()
        }
    finally:
        await connection.close()


async def test_migrations_build_exactly_the_schema_file(
    databases: TestDatabases, empty_dsn: str
) -> None:
    from_file = databases.create()
    try:
        connection = await asyncpg.connect(from_file)
        try:
            await schema.apply_schema_file(connection)
        finally:
            await connection.close()
        await schema.migrate(empty_dsn)

        expected, actual = await catalog(from_file), await catalog(empty_dsn)
    finally:
        databases.drop(from_file)

    assert len(expected["functions"]) >= 15  # the dump really sees the schema
    assert len(expected["indexes"]) >= 10
    for kind in CATALOG_QUERIES:
        assert actual[kind] == expected[kind], kind


async def test_migrate_is_idempotent_and_records_what_it_applied(empty_dsn: str) -> None:
    every_file = [path.name for path in schema.migration_files()]

    assert await schema.migrate(empty_dsn) == every_file
    assert await schema.migrate(empty_dsn) == []

    connection = await asyncpg.connect(empty_dsn)
    try:
        assert await schema.applied_migrations(connection) == every_file
        assert await schema.migrate(connection) == []  # an open connection works too
    finally:
        await connection.close()


async def test_racing_migrators_apply_each_migration_once(empty_dsn: str) -> None:
    outcomes = await asyncio.gather(*(schema.migrate(empty_dsn) for _ in range(3)))

    applied = [name for names in outcomes for name in names]
    assert sorted(applied) == [path.name for path in schema.migration_files()]


async def test_an_upgrade_applies_only_the_new_migrations_in_order(
    empty_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await schema.migrate(empty_dsn)
    for path in schema.migration_files():
        shutil.copy(path, tmp_path / path.name)
    (tmp_path / "9998_add_note.sql").write_text("ALTER TABLE courier_queues ADD COLUMN note text;")
    (tmp_path / "9999_fill_note.sql").write_text("UPDATE courier_queues SET note = 'x';")
    monkeypatch.setattr(schema, "MIGRATIONS_DIR", tmp_path)

    assert await schema.migrate(empty_dsn) == ["9998_add_note.sql", "9999_fill_note.sql"]


async def test_a_failing_migration_leaves_no_trace(
    empty_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await schema.migrate(empty_dsn)
    for path in schema.migration_files():
        shutil.copy(path, tmp_path / path.name)
    (tmp_path / "9999_broken.sql").write_text(
        "CREATE TABLE courier_half (id int); SELECT no_such_function();"
    )
    monkeypatch.setattr(schema, "MIGRATIONS_DIR", tmp_path)

    with pytest.raises(asyncpg.PostgresError):
        await schema.migrate(empty_dsn)

    connection = await asyncpg.connect(empty_dsn)
    try:
        assert "9999_broken.sql" not in await schema.applied_migrations(connection)
        assert await connection.fetchval("SELECT to_regclass('courier_half')") is None
    finally:
        await connection.close()
