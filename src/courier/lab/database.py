"""The runner's side of the database tier: reset, install, prefill, sample.

Before each run the database is returned to "no Courier here" (every ``courier_*``
table and function dropped) and gets either the real schema (the migrations) or
the mock schema (``db/sql/mock_schema.sql``). During the run ``DatabaseSampler``
writes one DB_STATS row and one QUEUE_DEPTHS row per queue every second.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from pathlib import Path

import asyncpg

from courier.db import repository, schema
from courier.lab import probes
from courier.measurements import record_schema

SQL_DIR = Path(__file__).parent / "sql"
MOCK_SCHEMA_FILE = schema.SQL_DIR / "mock_schema.sql"

FULL_DATASET_MESSAGES = 12_000
FULL_DATASET_QUEUES = 10
FULL_DATASET_SENDERS = 30


def _sql(name: str) -> str:
    return (SQL_DIR / name).read_text()


async def prepare(dsn: str, *, mock_schema: bool) -> None:
    """Reset the database and install the real or the mock schema."""
    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute(_sql("reset.sql"))
        if mock_schema:
            async with connection.transaction():
                await connection.execute(MOCK_SCHEMA_FILE.read_text())
        else:
            await schema.migrate(connection)
        with contextlib.suppress(asyncpg.PostgresError):
            await connection.execute(_sql("reset_stats.sql"))
    finally:
        await connection.close()


async def prefill_full(
    dsn: str,
    queue_ids: Sequence[int],
    receiver_ids: Sequence[int],
    message_size: int,
    *,
    sender_prefix: str = "dataset-sender",
) -> int:
    """Store the `full` dataset in one statement; returns the number of messages."""
    if len(queue_ids) < FULL_DATASET_QUEUES:
        raise ValueError(f"the full dataset needs {FULL_DATASET_QUEUES} queues")
    connection = await asyncpg.connect(dsn)
    try:
        stored: int = await connection.fetchval(
            _sql("prefill_full.sql"),
            FULL_DATASET_SENDERS,
            FULL_DATASET_MESSAGES,
            message_size,
            list(queue_ids[:FULL_DATASET_QUEUES]),
            list(receiver_ids),
            sender_prefix,
        )
        await connection.execute("ANALYZE")  # plans must see the filled tables
        return stored
    finally:
        await connection.close()


class DatabaseSampler:
    """Samples the database once per second into the runner's records."""

    def __init__(
        self, dsn: str, sink: probes.RowSink, run_id: str, *, interval: float = 1.0
    ) -> None:
        self.dsn = dsn
        self.sink = sink
        self.run_id = run_id
        self.interval = interval
        self._task: asyncio.Task[None] | None = None
        self._pool: asyncpg.Pool | None = None

    async def start(self) -> DatabaseSampler:
        self._pool = await asyncpg.create_pool(self.dsn, min_size=1, max_size=1)
        self._task = asyncio.create_task(self._run())
        return self

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._pool is not None:
            with contextlib.suppress(Exception):
                await self.sample_once()  # a last sample marks the state at the end
            await self._pool.close()

    async def sample_once(self) -> None:
        assert self._pool is not None
        # Stamped when it is taken, as scheduled: on a loaded box the two queries can
        # take a good part of a second, which must not move the stamps apart.
        ts_ns = time.time_ns()
        stats = await self._pool.fetchrow(_sql("db_stats.sql"))
        queues = await repository.Repository(self._pool).list_queues()
        messages = sum(queue.message_count for queue in queues)
        row = (self.run_id, ts_ns, stats["db_size_bytes"], stats["xact_commit"])
        self.sink(record_schema.DB_STATS, (*row, stats["xact_rollback"], messages))
        for queue in queues:
            self.sink(
                record_schema.QUEUE_DEPTHS, (self.run_id, ts_ns, queue.id, queue.message_count)
            )

    async def _run(self) -> None:
        next_at = time.monotonic()
        while True:
            next_at += self.interval
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            try:
                await self.sample_once()
            except (asyncpg.PostgresError, OSError):
                continue  # a missed sample is visible as a gap; the run goes on
