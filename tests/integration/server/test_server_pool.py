"""The middleware's connection pool: released without a reset round trip, and timed."""

from __future__ import annotations

import asyncio
import time

import asyncpg
import pytest

from courier import config, errors
from courier.db import pools, repository

POOL = config.PoolSettings(min_size=1, max_size=1)


async def test_a_released_connection_keeps_its_session_as_it_was(dsn: str) -> None:
    pool = await pools.open_pool(dsn, POOL)
    try:
        async with pool.acquire() as connection:
            await connection.execute("SET application_name = 'courier-kept'")
        async with pool.acquire() as connection:  # the same one: the pool holds one
            # asyncpg's default reset on release (RESET ALL, ...) would have cleared it.
            assert await connection.fetchval("SHOW application_name") == "courier-kept"
    finally:
        await pools.close_pool(pool)


async def test_pooled_connections_compile_no_plans(dsn: str) -> None:
    """JIT would compile a plan costed above jit_above_cost for 100-300 ms (see
    ``pools.SESSION_SETTINGS``); Courier's pools turn it off, whatever the server says."""
    pool = await pools.open_pool(dsn, POOL)
    repo = await repository.Repository.connect(dsn, POOL)
    try:
        for opened in (pool, repo.pool):
            async with opened.acquire() as connection:
                assert await connection.fetchval("SHOW jit") == "off"
    finally:
        await repo.close()
        await pools.close_pool(pool)


async def test_a_repository_opened_by_dsn_releases_as_the_middleware_does(dsn: str) -> None:
    """``Repository.connect`` (the controller, the benchmarks' database tier) opens
    the middleware's pool: no reset round trip per call either."""
    repo = await repository.Repository.connect(dsn, POOL)
    try:
        async with repo.pool.acquire() as connection:
            await connection.execute("SET application_name = 'courier-kept'")
        await repo.list_queues()  # a call through the pool releases its connection
        async with repo.pool.acquire() as connection:
            assert await connection.fetchval("SHOW application_name") == "courier-kept"
    finally:
        await repo.close()


async def test_a_transaction_left_open_is_still_rolled_back_on_release(dsn: str) -> None:
    pool = await pools.open_pool(dsn, POOL)
    try:
        async with pool.acquire() as connection:
            await connection.execute("CREATE TEMP TABLE kept (n int)")
            await connection.execute("BEGIN")
            await connection.execute("INSERT INTO kept VALUES (1)")
        async with pool.acquire() as connection:
            assert await connection.fetchval("SELECT count(*) FROM kept") == 0
    finally:
        await pools.close_pool(pool)


async def test_a_statement_past_its_timeout_is_cancelled_and_unavailable(dsn: str) -> None:
    timeouts = config.PoolSettings(min_size=1, max_size=1, statement_timeout=0.5)
    repo = repository.Repository(await pools.open_pool(dsn, timeouts), timeouts=timeouts)
    blocker = await asyncpg.connect(dsn)
    try:
        writer = await repo.register_client("writer")
        queue = await repo.create_queue("locked")
        async with blocker.transaction():
            await blocker.execute("SELECT FROM courier_queues WHERE id = $1 FOR UPDATE", queue.id)
            started = time.monotonic()
            with pytest.raises(errors.Unavailable, match=r"did not answer within 0\.5s"):
                await repo.send(writer.id, [queue.id], b"waits on the lock")
            assert time.monotonic() - started < 3
        # The statement was cancelled, not left running: nothing was stored, and the
        # pool's one connection serves the next call.
        assert (await repo.get_queue(queue.id)).message_count == 0
    finally:
        await blocker.close()
        await repo.close()


async def test_a_call_waits_for_a_taken_connection_no_longer_than_the_acquire_timeout(
    dsn: str,
) -> None:
    timeouts = config.PoolSettings(min_size=1, max_size=1, acquire_timeout=0.3)
    repo = repository.Repository(await pools.open_pool(dsn, timeouts), timeouts=timeouts)
    try:
        async with repo.pool.acquire():  # the pool's one connection, taken
            started = time.monotonic()
            with pytest.raises(errors.Unavailable, match=r"no database connection was free"):
                await asyncio.wait_for(repo.list_queues(), 5)
            assert 0.25 <= time.monotonic() - started < 3
        assert await repo.list_queues() == []  # free again: answered at once
    finally:
        await repo.close()


async def test_a_call_gets_a_connection_released_while_it_waits(dsn: str) -> None:
    timeouts = config.PoolSettings(min_size=1, max_size=1, acquire_timeout=5.0)
    repo = repository.Repository(await pools.open_pool(dsn, timeouts), timeouts=timeouts)
    try:
        async with repo.pool.acquire():
            waiting = asyncio.create_task(repo.list_queues())
            await asyncio.sleep(0.2)
            assert not waiting.done()
        assert await asyncio.wait_for(waiting, 5) == []
    finally:
        await repo.close()
