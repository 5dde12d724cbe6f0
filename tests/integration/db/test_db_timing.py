"""Every call reports pool wait, round trip and the function's own execution time."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import asyncpg
import pytest

from courier import errors, models
from courier.db import repository


async def test_timing_is_filled_and_execution_fits_inside_the_round_trip(
    repo: repository.Repository, writer: models.ClientInfo, queue: models.Queue
) -> None:
    calls: dict[str, Callable[[repository.Timing], Awaitable[object]]] = {
        "send": lambda timing: repo.send(writer.id, [queue.id], b"x", timing=timing),
        "peek": lambda timing: repo.read(writer.id, queue_id=queue.id, timing=timing),
        "list": lambda timing: repo.list_queues(timing=timing),
        "for me": lambda timing: repo.queues_for_me(writer.id, timing=timing),
    }
    for name, call in calls.items():
        timing = repository.Timing()
        await call(timing)
        assert 0 < timing.exec_ns <= timing.round_trip_ns, name
        assert timing.pool_wait_ns >= 0, name


async def test_a_miss_reported_as_status_is_still_timed(
    repo: repository.Repository, writer: models.ClientInfo, queue: models.Queue
) -> None:
    timing = repository.Timing()
    with pytest.raises(errors.QueueEmpty):
        await repo.read(writer.id, queue_id=queue.id, pop=True, timing=timing)
    assert 0 < timing.exec_ns <= timing.round_trip_ns


async def test_pool_wait_is_the_time_spent_waiting_for_a_connection(dsn: str) -> None:
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=1)
    try:
        repo = repository.Repository(pool)
        timing = repository.Timing()
        async with pool.acquire():
            call = asyncio.create_task(repo.list_queues(timing=timing))
            await asyncio.sleep(0.2)
        await call
        assert timing.pool_wait_ns >= 150_000_000
        assert timing.round_trip_ns < timing.pool_wait_ns
    finally:
        await pool.close()


async def test_exec_time_counts_waiting_inside_the_database(
    repo: repository.Repository, pool: asyncpg.Pool, queue: models.Queue
) -> None:
    timing = repository.Timing()
    async with pool.acquire() as holder, holder.transaction():
        await holder.execute("SELECT 1 FROM courier_queues WHERE id = $1 FOR UPDATE", queue.id)
        deletion = asyncio.create_task(repo.delete_queue(queue.id, timing=timing))
        await asyncio.sleep(0.2)  # the function waits for the row lock meanwhile
    await deletion
    assert timing.exec_ns >= 150_000_000
    assert timing.exec_ns <= timing.round_trip_ns
