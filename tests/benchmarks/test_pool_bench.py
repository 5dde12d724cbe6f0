"""What the connection pool costs a stored-function call, in the middleware's CPU.

Every call the middleware makes takes a pooled connection, runs one statement and
gives the connection back. This prints the CPU time of its own process (not the
database's) per call of ``SELECT 1``, on uvloop as ``courier serve`` runs:

- as every ``Repository`` call takes its connection (``Repository._connection``:
  the pool of ``pools.create_pool``, an acquire timeout);
- the same pool, acquired and released by hand with the acquire timeout;
- without the acquire timeout (asyncpg runs such an acquire as a task of its own);
- without that, and without asyncpg's idle timer (``max_inactive_connection_lifetime``
  0: no timer set on each release to close a connection idle for five minutes);
- on one connection held by hand, with no pool: the floor.

A warm-up round first; then the ways take turns, each round in another order, so
that the host's drift falls on all alike. The median of the rounds is printed. Run
    .venv/bin/pytest tests/benchmarks/test_pool_bench.py -s
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable

import asyncpg
import pytest
import uvloop

from courier.db import pools, repository

ROUNDS = 8
CALLS = 3_000
POOL_SIZE = 10
ACQUIRE_TIMEOUT_S = 10.0

Call = Callable[[], Awaitable[int]]


@pytest.mark.benchmark
@pytest.mark.timeout(600)
def test_pool_cpu_per_call(dsn: str) -> None:
    spent = uvloop.run(_measure(dsn))
    print(f"\n{'CPU per call of SELECT 1 (µs)':<58}{'median':>8}{'min':>8}{'max':>8}")
    for name, values in spent.items():
        median = statistics.median(values)
        print(f"{name:<58}{median:>8.1f}{min(values):>8.1f}{max(values):>8.1f}")


async def _measure(dsn: str) -> dict[str, list[float]]:
    pool = await pools.create_pool(dsn, POOL_SIZE, POOL_SIZE)
    untimed = await pools.create_pool(dsn, POOL_SIZE, POOL_SIZE, max_inactive_connection_lifetime=0)
    repo = repository.Repository(pool)
    held = await asyncpg.connect(dsn)
    try:
        calls: dict[str, Call] = {
            "Repository._connection (the middleware's calls)": lambda: _through(repo),
            "the same pool, acquire timeout": _by_hand(pool, ACQUIRE_TIMEOUT_S),
            "the same pool, no acquire timeout": _by_hand(pool, None),
            "no acquire timeout, no idle timer": _by_hand(untimed, None),
            "one connection, no pool": lambda: held.fetchval("SELECT 1"),
        }
        for call in calls.values():  # warm-up: connections opened, code paths run
            await _cpu_per_call(call)
        spent: dict[str, list[float]] = {name: [] for name in calls}
        names = list(calls)
        for round_ in range(ROUNDS):
            shift = round_ % len(names)
            for name in names[shift:] + names[:shift]:
                spent[name].append(await _cpu_per_call(calls[name]))
        return spent
    finally:
        await held.close()
        await pool.close()
        await untimed.close()


def _by_hand(pool: asyncpg.Pool, timeout: float | None) -> Call:
    async def call() -> int:
        connection = await pool.acquire(timeout=timeout)
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
