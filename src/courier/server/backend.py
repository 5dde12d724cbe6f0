"""The narrow boundary between handlers and storage: typed request in, typed result out.

``Backend`` is the part of the repository's method set that handlers use, as a
protocol, so the real ``courier.db.repository.Repository``, the fixed-answer
``courier.lab.mock.MockBackend`` (`courier serve --mock`) and a later batching layer
are interchangeable. ``InstanceStore`` is what the instance registry needs. This
module also opens the asyncpg pool and decides which failures mean "the database is
out of reach" (UNAVAILABLE).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Protocol

import asyncpg

from courier import config, errors, models
from courier.db import repository

Timing = repository.Timing

CONNECT_TIMEOUT = 5.0
"""Seconds to open one database connection; past it the request gets UNAVAILABLE."""


class Backend(Protocol):
    """What handlers call: one method per request kind."""

    async def register_client(
        self, name: str, mode: models.ClientMode = ..., *, timing: Timing | None = None
    ) -> models.ClientInfo: ...

    async def login(
        self, client: int | str, instance_id: int, *, timing: Timing | None = None
    ) -> models.ClientInfo: ...

    async def logout(
        self, client_id: int, instance_id: int, *, timing: Timing | None = None
    ) -> None: ...

    async def create_queue(self, name: str, *, timing: Timing | None = None) -> models.Queue: ...

    async def delete_queue(
        self, queue_id: int, *, if_empty: bool = False, timing: Timing | None = None
    ) -> None: ...

    async def get_queue(
        self, queue: int | str, *, timing: Timing | None = None
    ) -> models.Queue: ...

    async def list_queues(self, *, timing: Timing | None = None) -> list[models.Queue]: ...

    async def send(
        self,
        sender_id: int,
        queue_ids: Sequence[int],
        body: str,
        *,
        receiver: int | None = None,
        priority: int = models.DEFAULT_PRIORITY,
        context: int | None = None,
        timing: Timing | None = None,
    ) -> list[int]: ...

    async def read(
        self,
        reader_id: int,
        *,
        queue_id: int | None = None,
        sender_id: int | None = None,
        order: models.Order = models.Order.TIME,
        pop: bool = False,
        timing: Timing | None = None,
    ) -> models.Message: ...

    async def pop_response(
        self, reader_id: int, queue_id: int, context: int, *, timing: Timing | None = None
    ) -> models.Message: ...

    async def queues_for_me(
        self, reader_id: int, *, timing: Timing | None = None
    ) -> list[models.Queue]: ...


class InstanceStore(Protocol):
    """What the instance registry calls."""

    async def register_instance(
        self, address: str, *, timing: Timing | None = None, ttl_seconds: float = ...
    ) -> models.Instance: ...

    async def heartbeat(self, instance_id: int, *, timing: Timing | None = None) -> None: ...

    async def expire_instances(
        self, ttl_seconds: float, *, timing: Timing | None = None
    ) -> list[int]: ...

    async def unregister_instance(
        self, instance_id: int, *, timing: Timing | None = None
    ) -> None: ...


# Driver failures that say nothing about the request and everything about the link:
# lost or refused connections, a server shutting down, no connection slots left.
OUTAGE_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,
    asyncpg.exceptions.InsufficientResourcesError,
    asyncpg.exceptions.ConnectionDoesNotExistError,
)


def is_outage(exc: BaseException) -> bool:
    """Whether a failure means the database is out of reach rather than a bug."""
    if isinstance(exc, (errors.Unavailable, *OUTAGE_ERRORS)):
        return True
    message = str(exc)
    if isinstance(exc, asyncpg.exceptions.InternalClientError):
        # A connection whose backend was terminated while idle can fail its next
        # query this way instead of with a connection error (asyncpg issue #1069).
        return "cannot switch to state" in message
    # A closed connection or a closing pool surfaces as a bare InterfaceError.
    return type(exc) is asyncpg.InterfaceError and ("closed" in message or "closing" in message)


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
    opened: asyncpg.Pool = await asyncpg.create_pool(
        dsn, min_size=pool.min_size, max_size=pool.max_size, connect=connect, reset=keep_session
    )
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
        if not isinstance(exc, TimeoutError) and not is_outage(exc):
            raise
        opened.terminate()
