"""Helpers for the database-tier tests that look behind the repository's back."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import asyncpg

from courier import models
from courier.db import batching, repository

LONG = 30_000  # ms: a lease that does not run out during a test


async def message_count(pool: asyncpg.Pool) -> int:
    """Messages stored, counted directly in the table."""
    count: int = await pool.fetchval("SELECT count(*) FROM courier_messages")
    return count


async def lease(
    repo: repository.Repository, reader: int, queue: int, instance: int, ms: int = LONG
) -> models.Message:
    """A pop of the queue that leases its message for ``ms`` through ``instance``."""
    return await repo.read(reader, queue_id=queue, pop=True, lease=repository.Lease(ms, instance))


class CountingRepository(batching.BatchedRepository):
    """The batched repository, noting the operations of every batched call it makes."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        super().__init__(pool)
        self.exchanges: list[list[repository.Operation]] = []

    @property
    def batches(self) -> list[int]:
        """The size of each batched call."""
        return [len(operations) for operations in self.exchanges]

    async def exchange(
        self, operations: Sequence[repository.Operation]
    ) -> repository.BatchOutcome[Any]:
        self.exchanges.append(list(operations))
        return await super().exchange(operations)


async def until_a_backend_waits_for_a_lock(pool: asyncpg.Pool) -> None:
    deadline = time.monotonic() + 10
    query = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
    while not await pool.fetchval(query):
        assert time.monotonic() < deadline, "no call waits for the lock"
        await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def open_transaction(
    dsn: str, statement: str, *args: object
) -> AsyncIterator[Callable[[], Awaitable[None]]]:
    """A transaction on a connection of its own that has run ``statement`` and not yet
    committed; yields its commit, and commits at the end if the body did not."""
    connection = await asyncpg.connect(dsn)
    try:
        transaction = connection.transaction()
        await transaction.start()
        await connection.execute(statement, *args)
        committed = False

        async def commit() -> None:
            nonlocal committed
            if not committed:
                committed = True
                await transaction.commit()

        yield commit
        await commit()
    finally:
        await connection.close()
