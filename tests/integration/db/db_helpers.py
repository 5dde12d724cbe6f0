"""Helpers for the database-tier tests that look behind the repository's back."""

from __future__ import annotations

import asyncpg


async def message_count(pool: asyncpg.Pool) -> int:
    """Messages stored, counted directly in the table."""
    count: int = await pool.fetchval("SELECT count(*) FROM courier_messages")
    return count
