"""The middleware's connection pool releases connections without a reset round trip."""

from __future__ import annotations

from courier import config
from courier.db import pools

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
