"""Helpers for the database-tier tests that look behind the repository's back."""

from __future__ import annotations

import asyncpg

from courier import models
from courier.db import repository

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
