"""The one LISTEN connection per instance that turns database NOTIFYs into wake-ups,
and shows the instance is alive.

It is a dedicated asyncpg connection, outside the pool, subscribed to ``CHANNEL``,
on which the database announces every stored message (schema.sql). Each payload goes
to ``on_payload``. If the connection drops, a background task reconnects with capped
backoff and then calls ``on_restored``, because notifications sent meanwhile were lost.

The same connection holds the instance's liveness lock (``hold_liveness_lock``): a
session-level advisory lock that the database frees the moment the process dies,
which is how the other instances tell at once that it is gone
(``courier_instance_dead_v1``). It is taken again after every reconnect.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import asyncpg

from courier.db import _translate, pools

log = logging.getLogger(__name__)

FIRST_RETRY_DELAY = 0.05
MAX_RETRY_DELAY = 1.0

LIVENESS_LOCK_CLASS = 1131377778
"""First key of every liveness lock (schema.sql); the second is the instance id
modulo 2**31."""

LOCK = "SELECT pg_advisory_lock($1, ($2::bigint % 2147483648)::integer)"
UNLOCK = "SELECT pg_advisory_unlock($1, ($2::bigint % 2147483648)::integer)"

CHANNEL = "courier_messages"
"""Payload ``<queue_id>:<receiver_id>``, the receiver empty for messages to anyone."""


class NotificationListener:
    def __init__(
        self, dsn: str, on_payload: Callable[[str], None], on_restored: Callable[[], None]
    ) -> None:
        self._dsn = dsn
        self._on_payload = on_payload
        self._on_restored = on_restored
        self._connection: asyncpg.Connection | None = None
        self._reconnecting: asyncio.Task[None] | None = None
        self._closed = False
        self._instance_id: int | None = None

    @property
    def connected(self) -> bool:
        return self._connection is not None and not self._connection.is_closed()

    async def start(self) -> None:
        """Connect now; raises Unavailable if the database cannot be reached."""
        await self._connect()

    async def hold_liveness_lock(self, instance_id: int) -> None:
        """Hold this instance's liveness lock (instead of any held before) for as long
        as the process lives; after a reconnect it is taken again."""
        previous, self._instance_id = self._instance_id, instance_id
        connection = self._connection
        if connection is None or connection.is_closed():
            return  # the reconnect takes it
        if previous is not None:
            await connection.execute(
                "SELECT pg_advisory_unlock($1, ($2::bigint % 2147483648)::integer)",
                LIVENESS_LOCK_CLASS,
                previous,
            )
        await _lock(connection, instance_id)

    async def close(self) -> None:
        self._closed = True
        if self._reconnecting is not None:
            self._reconnecting.cancel()
            await asyncio.gather(self._reconnecting, return_exceptions=True)
        connection, self._connection = self._connection, None
        if connection is not None and not connection.is_closed():
            connection.terminate()  # no need to wait for a goodbye from a LISTEN-only link

    async def _connect(self) -> None:
        connection = await pools.connect(self._dsn)
        try:
            await connection.add_listener(CHANNEL, self._on_notification)
            if self._instance_id is not None:
                await _lock(connection, self._instance_id)
        except BaseException:
            connection.terminate()
            raise
        connection.add_termination_listener(self._on_lost)
        self._connection = connection

    def _on_notification(self, _connection: Any, _pid: int, _channel: str, payload: str) -> None:
        self._on_payload(payload)

    def _on_lost(self, _connection: Any) -> None:
        if self._closed or self._reconnecting is not None:
            return
        log.warning("lost the LISTEN connection to the database; reconnecting")
        self._connection = None
        self._reconnecting = asyncio.get_running_loop().create_task(self._reconnect())

    async def _reconnect(self) -> None:
        delay = FIRST_RETRY_DELAY
        while not self._closed:
            try:
                await self._connect()
            except Exception as exc:
                if not _translate.is_outage(exc):
                    log.exception("unexpected failure re-opening the LISTEN connection")
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_RETRY_DELAY)
                continue
            log.info("LISTEN connection to the database restored")
            self._reconnecting = None
            self._on_restored()
            return


async def _lock(connection: asyncpg.Connection, instance_id: int) -> None:
    await connection.execute(
        "SELECT pg_advisory_lock($1, ($2::bigint % 2147483648)::integer)",
        LIVENESS_LOCK_CLASS,
        instance_id,
    )
