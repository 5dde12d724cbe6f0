"""The database of a benchmark run: a fresh durable embedded PostgreSQL, or a given one.

The fresh one is the lab runner's (``runner.fresh_database``: a temp dir, fsync on,
default ``synchronous_commit``, the schema migrated), with ``max_connections``
raised when the direct path needs more connections than it allows; on it,
``fresh_database`` makes further clean databases, one per level where needed. A given DSN is
migrated (a no-op when up to date) and otherwise left as it is.

Beyond that: ``insert_messages`` bulk-loads messages straight into
``courier_messages`` (what a benchmark stores before it measures), and
``sample_messages`` reads the table's row counts, vacuum count and size.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

import asyncpg

from courier import errors
from courier.db import embedded, schema
from courier.lab import runner

HEADROOM = 20
"""Connections kept free for the benchmark's own setup and for administrators."""
CHUNK_ROWS = 100_000
"""Rows per bulk-load statement: each commits, and progress moves once per chunk."""

# One statement per chunk of rows i = $5 .. $6: queue, sender and receiver taken
# round-robin from the arrays (a NULL receiver: for anyone), priorities cycling 1..10.
# audience is generated from receiver_id; created_at defaults to the insert instant.
INSERT_MESSAGES = """
INSERT INTO courier_messages (queue_id, sender_id, receiver_id, priority, body)
SELECT ($1::bigint[])[1 + i % cardinality($1::bigint[])],
       ($2::bigint[])[1 + i % cardinality($2::bigint[])],
       ($3::bigint[])[1 + i % cardinality($3::bigint[])],
       1 + i % 10,
       convert_to($4::text, 'UTF8')
FROM generate_series($5::bigint, $6::bigint) AS i
"""

MESSAGES_TABLE = """
SELECT sum(s.n_live_tup)::bigint AS live_rows, sum(s.n_dead_tup)::bigint AS dead_rows,
       sum(s.autovacuum_count)::bigint AS autovacuums,
       sum(pg_total_relation_size(s.relid))::bigint AS total_bytes
FROM pg_stat_user_tables s
WHERE s.relid IN (SELECT p.relid FROM pg_partition_tree('courier_messages') p WHERE p.isleaf)
"""
"""Both partitions of courier_messages (persistent and not) together."""


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
    async with fresh_server(connections=connections) as server:
        yield server.dsn, True


@contextlib.asynccontextmanager
async def fresh_server(*, connections: int) -> AsyncIterator[embedded.EmbeddedPostgres]:
    """The lab runner's fresh durable embedded PostgreSQL, allowing ``connections``."""
    async with runner.fresh_database(durable=True) as server:
        await allow_connections(server, connections + HEADROOM)
        yield server


@contextlib.asynccontextmanager
async def fresh_database(server: embedded.EmbeddedPostgres, name: str) -> AsyncIterator[str]:
    """A new, migrated database on the server (its DSN); dropped with its rows afterwards.
    Cheaper than a new server when a benchmark needs a clean database per level."""
    await _admin(server, f'CREATE DATABASE "{name}"')  # the name is the benchmark's own
    try:
        dsn = server.dsn_for(name)
        await schema.migrate(dsn)
        yield dsn
    finally:
        await _admin(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def _admin(server: embedded.EmbeddedPostgres, statement: str) -> None:
    connection = await asyncpg.connect(server.admin_dsn)
    try:
        await connection.execute(statement)
    finally:
        await connection.close()


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


@dataclass(frozen=True, slots=True)
class Messages:
    """Messages to bulk-load, spread round-robin over the queues, senders and
    receivers given (a receiver None: for anyone)."""

    queue_ids: Sequence[int]
    sender_ids: Sequence[int]
    receiver_ids: Sequence[int | None]
    count: int
    body: str


async def insert_messages(
    dsn: str, messages: Messages, progress: Callable[[int], None] = lambda stored: None
) -> int:
    """Store the messages, CHUNK_ROWS per statement; ``progress`` hears the running total.
    Returns how many rows were stored."""
    connection = await asyncpg.connect(dsn)
    try:
        stored = 0
        for first in range(0, messages.count, CHUNK_ROWS):
            last = min(first + CHUNK_ROWS, messages.count) - 1
            status = await connection.execute(
                INSERT_MESSAGES, list(messages.queue_ids), list(messages.sender_ids),
                list(messages.receiver_ids), messages.body, first, last,
            )  # fmt: skip
            stored += int(status.split()[-1])  # "INSERT 0 <rows>"
            progress(stored)
        return stored
    finally:
        await connection.close()


@dataclass(frozen=True, slots=True)
class TableSample:
    """courier_messages at one instant (``at_s``: seconds from the benchmark's zero).

    The row counts are the statistics collector's (``pg_stat_user_tables``), which
    each server process reports about once a second; the size is exact."""

    at_s: float
    live_rows: int
    dead_rows: int
    autovacuums: int
    total_bytes: int  # table, indexes and TOAST


async def sample_messages(connection: asyncpg.Connection, at_s: float) -> TableSample:
    row = await connection.fetchrow(MESSAGES_TABLE)
    return TableSample(
        at_s, int(row["live_rows"]), int(row["dead_rows"]), int(row["autovacuums"]),
        int(row["total_bytes"]),
    )  # fmt: skip
