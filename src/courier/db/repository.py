"""Typed async access to Courier's stored functions: the only caller of them.

INTERFACE CONTRACT (bodies to be implemented by the database-tier work).
Every method is one stored-function call. Every method takes an optional
``timing`` sink that it fills with pool wait, round trip and the execution time the
function reported, so the lab can split database time from network time.
Errors arrive as courier.errors exceptions, translated in one place.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from courier import config, models


@dataclass(slots=True)
class Timing:
    """Filled in by a repository call; all values in nanoseconds."""

    pool_wait_ns: int = 0
    round_trip_ns: int = 0
    exec_ns: int = 0


class Repository:
    def __init__(self, pool: asyncpg.Pool, limits: config.Limits = config.Limits()) -> None:
        self.pool = pool
        self.limits = limits

    # -- clients ---------------------------------------------------------------
    async def register_client(
        self, name: str, mode: models.ClientMode = models.ClientMode.READ_WRITE,
        *, timing: Timing | None = None,
    ) -> models.ClientInfo:
        """ClientExists on a duplicate name; BadRequest on an empty name."""
        raise NotImplementedError

    async def get_client(self, client: int | str, *, timing: Timing | None = None) -> models.ClientInfo:
        """By id (int) or name (str). ClientNotFound."""
        raise NotImplementedError

    async def login(self, client: int | str, instance_id: int, *, timing: Timing | None = None) -> models.ClientInfo:
        """ClientNotFound; ClientOnline if a live session exists (on any instance)."""
        raise NotImplementedError

    async def logout(self, client_id: int, instance_id: int, *, timing: Timing | None = None) -> None:
        """Ends the session if this instance holds it; otherwise does nothing."""
        raise NotImplementedError

    # -- instances -------------------------------------------------------------
    async def register_instance(self, address: str, *, timing: Timing | None = None) -> models.Instance: ...
    async def heartbeat(self, instance_id: int, *, timing: Timing | None = None) -> None: ...
    async def list_instances(self, *, timing: Timing | None = None) -> list[models.Instance]:
        """Live instances only (heartbeat younger than their ttl)."""
        raise NotImplementedError
    async def expire_instances(self, ttl_seconds: float, *, timing: Timing | None = None) -> list[int]:
        """Delete instances whose heartbeat is older than ttl, releasing their sessions."""
        raise NotImplementedError
    async def unregister_instance(self, instance_id: int, *, timing: Timing | None = None) -> None:
        """Graceful stop: releases the instance's sessions and removes it."""
        raise NotImplementedError

    # -- queues ----------------------------------------------------------------
    async def create_queue(self, name: str, *, timing: Timing | None = None) -> models.Queue:
        """QueueExists; BadRequest on an empty name."""
        raise NotImplementedError
    async def delete_queue(self, queue_id: int, *, if_empty: bool = False, timing: Timing | None = None) -> None:
        """QueueNotFound; QueueNotEmpty when if_empty and messages remain."""
        raise NotImplementedError
    async def get_queue(self, queue: int | str, *, timing: Timing | None = None) -> models.Queue:
        """By id or name, with message_count. QueueNotFound."""
        raise NotImplementedError
    async def list_queues(self, *, timing: Timing | None = None) -> list[models.Queue]:
        """All queues ordered by id, with message counts."""
        raise NotImplementedError

    # -- messages --------------------------------------------------------------
    async def send(
        self, sender_id: int, queue_ids: Sequence[int], body: str, *,
        receiver: int | None = None, priority: int = models.DEFAULT_PRIORITY,
        context: int | None = None, timing: Timing | None = None,
    ) -> list[int]:
        """One independent copy per queue, atomically; ids in queue_ids order.
        QueueNotFound (nothing stored), InvalidPriority, PayloadTooLarge, BadRequest
        (no queues), NotAuthorised (read-only sender)."""
        raise NotImplementedError

    async def read(
        self, reader_id: int, *, queue_id: int | None = None, sender_id: int | None = None,
        order: models.Order = models.Order.TIME, pop: bool = False,
        timing: Timing | None = None,
    ) -> models.Message:
        """Peek or pop one visible message (receiver NULL or reader).
        BadRequest (neither queue nor sender), QueueNotFound, QueueEmpty (a queue was
        given and nothing in it is visible), NoMessage (sender-only read found none)."""
        raise NotImplementedError

    async def pop_response(
        self, reader_id: int, queue_id: int, context: int, *, timing: Timing | None = None,
    ) -> models.Message:
        """Pop the message in queue addressed to reader with this context.
        QueueNotFound; NoMessage."""
        raise NotImplementedError

    async def queues_for_me(self, reader_id: int, *, timing: Timing | None = None) -> list[int]:
        """Sorted distinct ids of queues holding a message the reader could read."""
        raise NotImplementedError
