"""The mock tiers: the mock middleware and the mock schema answer the whole workload."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from lab_helpers import quick_spec, read_kind

from courier.db import schema
from courier.lab import database, runner
from courier.measurements import record_schema

SIGNATURES = """
SELECT p.proname, pg_get_function_identity_arguments(p.oid) AS arguments,
       pg_get_function_result(p.oid) AS result
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = current_schema() AND p.proname ~ '^courier_.*_v[0-9]+$'
ORDER BY 1, 2
"""

pytestmark = pytest.mark.slow


async def signatures(dsn: str) -> list[tuple[str, str, str]]:
    connection = await asyncpg.connect(dsn)
    try:
        return [tuple(row) for row in await connection.fetch(SIGNATURES)]
    finally:
        await connection.close()


async def test_the_mock_schema_has_every_stored_function_of_the_real_one(
    dsn: str, databases: Any
) -> None:
    mock_dsn = databases.create()
    await database.prepare(mock_dsn, mock_schema=True)
    real = await signatures(dsn)
    assert len(real) > 15
    assert await signatures(mock_dsn) == real
    assert schema.SQL_DIR.joinpath("mock_schema.sql").is_file()


async def test_preparing_switches_between_the_real_and_the_mock_schema(dsn: str) -> None:
    await database.prepare(dsn, mock_schema=True)
    connection = await asyncpg.connect(dsn)
    try:
        tables = "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'courier\\_%'"
        assert await connection.fetchval(tables) == 0
        await database.prepare(dsn, mock_schema=False)
        assert await connection.fetchval(tables) >= 4
        assert await connection.fetchval("SELECT count(*) FROM courier_messages") == 0
    finally:
        await connection.close()


async def test_both_mock_tiers_answer_the_standard_workload_without_errors(
    dsn: str, tmp_path: Path
) -> None:
    experiment = quick_spec("mocks", factors={"mock": ["database", "middleware"]})
    options = runner.RunnerOptions(out=tmp_path, dsn=dsn)
    directory = await runner.run_experiment(experiment, options)
    for run_id, tier in (("r000", "database"), ("r001", "middleware")):
        rows = read_kind(directory / run_id, record_schema.CLIENT_REQUESTS)
        load = [row for row in rows if row["behaviour"] == "standard"]
        operations = collections.Counter(row["operation"] for row in load)
        assert operations["delete_queue"] >= 20, (tier, operations)  # whole cycles ran
        assert {row["status"] for row in rows} == {"OK"}, tier
        served = read_kind(directory / run_id, record_schema.SERVER_REQUESTS)
        assert len(served) == len(rows), tier
        # Nothing reached a database table: the mock answered with zero database time.
        assert {row["db_exec_ns"] for row in served} == {0}, tier
