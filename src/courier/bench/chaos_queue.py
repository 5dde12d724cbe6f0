"""The chaos run's queue as the database holds it: how many messages wait, and which.

``Depth`` samples the queue while the run goes on (the most messages waiting at
once, and when the number last changed, which tells a drain that has stopped);
``left`` reads the message numbers still stored at the end.
"""

from __future__ import annotations

import time

import asyncpg

COUNTS = """
SELECT (SELECT count(*) FROM courier_messages WHERE queue_id = $1) AS messages,
       (SELECT count(*) FROM courier_held_messages WHERE queue_id = $1) AS held
"""
HEADS = """
SELECT substring(body FROM 1 FOR 32) AS head FROM courier_messages WHERE queue_id = $1
UNION ALL
SELECT substring(body FROM 1 FOR 32) FROM courier_held_messages WHERE queue_id = $1
"""
CONNECT_TIMEOUT_S = 5.0
UNREACHABLE = (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError)
"""What a sample may meet while PostgreSQL restarts; the sample is then skipped."""


async def counts(dsn: str, queue_id: int) -> dict[str, int]:
    """Messages of the queue stored visible and held (leased or delayed)."""
    connection = await asyncpg.connect(dsn, timeout=CONNECT_TIMEOUT_S)
    try:
        row = await connection.fetchrow(COUNTS, queue_id)
    finally:
        await connection.close()
    return {"messages": int(row["messages"]), "held": int(row["held"])}


async def left(dsn: str, queue_id: int) -> list[tuple[int, int]]:
    """(producer, number) of every message of the queue still stored."""
    connection = await asyncpg.connect(dsn, timeout=CONNECT_TIMEOUT_S)
    try:
        rows = await connection.fetch(HEADS, queue_id)
    finally:
        await connection.close()
    numbers = []
    for row in rows:
        producer, n, _ = bytes(row["head"]).split(b":", 2)
        numbers.append((int(producer), int(n)))
    return numbers


class Depth:
    """Messages waiting in the queue (visible and held), sampled now and then."""

    def __init__(self, dsn: str, queue_id: int) -> None:
        self._dsn = dsn
        self._queue_id = queue_id
        self.most = 0
        self.last: int | None = None  # None: no sample since ``forget``
        self.changed_at = time.monotonic()

    async def sample(self) -> None:
        try:
            found = await counts(self._dsn, self._queue_id)
        except UNREACHABLE:
            return
        waiting = sum(found.values())
        self.most = max(self.most, waiting)
        if waiting != self.last:
            self.last, self.changed_at = waiting, time.monotonic()

    def forget(self) -> None:
        """Start over: the next sample counts as a change."""
        self.last = None
