"""The connection pool's own CPU per stored-function call.

Every call the middleware makes takes a pooled connection, runs one statement and
gives the connection back. This prints the CPU time per call of this process (not
the database's) for ``SELECT 1`` four ways:

- through an asyncpg pool as the middleware had it before: connections closed after
  five idle minutes (a timer per release) and every acquire with a timeout;
- through ``pools.create_pool`` (no idle timer), every acquire with a timeout;
- as ``Repository`` calls it: ``pools.create_pool``, and no timeout while a
  connection is free;
- on one connection held by hand, with no pool: the floor.

The four take turns, round after round, so that the host's drift falls on all
alike; the median of the rounds is printed. Run with
    .venv/bin/pytest tests/benchmarks/test_pool_bench.py -s
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable

import asyncpg
import pytest

from courier.db import pools, repository

ROUNDS = 8
CALLS = 3_000
POOL_SIZE = 10
ACQUIRE_TIMEOUT_S = 10.0

Call = Callable[[], Awaitable[int]]


@pytest.mark.benchmark
@pytest.mark.timeout(600)
async def test_pool_cpu_per_call(dsn: str) -> None:
    before = await asyncpg.create_pool(
        dsn, min_size=POOL_SIZE, max_size=POOL_SIZE, reset=pools.keep_session
    )
    now = await pools.create_pool(dsn, POOL_SIZE, POOL_SIZE)
    repo = repository.Repository(now)
    held = await asyncpg.connect(dsn)
    try:
        calls = {
            "asyncpg pool, idle timer, acquire timeout (before)": _with_timeout(before),
            "pools.create_pool, acquire timeout": _with_timeout(now),
            "pools.create_pool, as Repository acquires": lambda: _through(repo),
            "one connection, no pool": lambda: held.fetchval("SELECT 1"),
        }
        spent = {name: [] for name in calls}
        for _ in range(ROUNDS):
            for name, call in calls.items():
                spent[name].append(await _cpu_per_call(call))
        print(f"\n{'CPU per call of SELECT 1 (µs)':<52}{'median':>8}{'min':>8}{'max':>8}")
        for name, values in spent.items():
            print(
                f"{name:<52}{statistics.median(values):>8.1f}{min(values):>8.1f}{max(values):>8.1f}"
            )
    finally:
        await held.close()
        await before.close()
        await now.close()


def _with_timeout(pool: asyncpg.Pool) -> Call:
    async def call() -> int:
        connection = await pool.acquire(timeout=ACQUIRE_TIMEOUT_S)
        try:
            return int(await connection.fetchval("SELECT 1"))
        finally:
            await pool.release(connection)

    return call


async def _through(repo: repository.Repository) -> int:
    async with repo._connection() as connection:  # the path every Repository call takes
        return int(await connection.fetchval("SELECT 1"))


async def _cpu_per_call(call: Call) -> float:
    """Microseconds of this process's CPU per call, over CALLS calls."""
    began = time.process_time()
    for _ in range(CALLS):
        assert await call() == 1
    return (time.process_time() - began) / CALLS * 1e6
