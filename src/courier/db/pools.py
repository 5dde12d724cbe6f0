"""The middleware's asyncpg pool: how it connects, releases and closes.

Every failure to connect is reported as Unavailable, so while the database is down
each request fails fast and typed, and the pool heals once it is back.
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

from courier import config, errors
from courier.db import _translate

CONNECT_TIMEOUT = 5.0
"""Seconds to open one database connection; past it the request gets UNAVAILABLE."""

SESSION_SETTINGS = {"jit": "off"}
"""Set on every pooled connection. Courier's statements are short, and compiling one
costs 100-300 ms: PostgreSQL compiles every plan its planner costs above
``jit_above_cost``, and before PostgreSQL 18 a count over every queue's messages got
there (on PostgreSQL 15 with JIT, a QUEUES_FOR_ME over 82 queues took 110-210 ms
instead of 0.25 ms)."""


async def connect(*args: Any, **kwargs: Any) -> asyncpg.Connection:
    """asyncpg.connect, with every failure to connect reported as Unavailable.

    The pool calls this whenever it (re)opens a connection, so while the database is
    down each request fails fast and typed, and the pool heals once it is back.
    """
    kwargs.setdefault("timeout", CONNECT_TIMEOUT)
    try:
        return await asyncpg.connect(*args, **kwargs)
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise errors.Unavailable(f"cannot reach the database: {exc}") from exc


async def open_pool(dsn: str, pool: config.PoolSettings) -> asyncpg.Pool:
    """The instance's connection pool; fails with Unavailable if the database is down."""
    return await create_pool(dsn, pool.min_size, pool.max_size, connect=connect)


async def create_pool(dsn: str, min_size: int, max_size: int, **options: Any) -> asyncpg.Pool:
    """An asyncpg pool for stored-function calls, whose connections are released as
    they are (``keep_session``) and compile no plans (SESSION_SETTINGS); ``options``
    go to ``asyncpg.create_pool``."""
    settings = SESSION_SETTINGS | options.pop("server_settings", {})
    opened: asyncpg.Pool = await asyncpg.create_pool(
        dsn, min_size=min_size, max_size=max_size, reset=keep_session,
        server_settings=settings, **options,
    )  # fmt: skip
    return opened


async def keep_session(connection: asyncpg.Connection) -> None:
    """Release a pooled connection as it is, without asyncpg's reset query.

    By default every release sends ``SELECT pg_advisory_unlock_all(); CLOSE ALL;
    UNLISTEN *; RESET ALL``: a second round trip per request, which cost the
    database about as much CPU as the request itself. The pool's connections only
    ever call stored functions, one statement in autocommit, so they hold no locks,
    cursors, listeners or settings to clear; asyncpg still rolls back a transaction
    left open (it does that before calling this).
    """


async def close_pool(opened: asyncpg.Pool, timeout: float = 5.0) -> None:
    """Close gracefully, or terminate if connections do not come back in time."""
    try:
        await asyncio.wait_for(opened.close(), timeout)
    except Exception as exc:
        if not isinstance(exc, TimeoutError) and not _translate.is_outage(exc):
            raise
        opened.terminate()
