"""The one LISTEN connection per instance that turns database NOTIFYs into wake-ups,
and shows the instance is alive.

It is a dedicated asyncpg connection, outside the pool, subscribed to ``CHANNEL``,
on which the database announces every stored message (schema.sql). Each payload goes
to ``on_payload``. If the connection drops, a background task reconnects with capped
backoff and then calls ``on_restored``, because notifications sent meanwhile were lost.

The same connection holds the instance's liveness lock (``hold_liveness_lock``): a
session-level advisory lock that the database frees the moment the process dies,
which is how the other instances tell at once that it is gone
(``courier_instance_dead_v1``). It is taken again after every reconnect; while the
backend of a link that went silent still holds it, the new link tries again at every
check instead of waiting for it.

A link can also go silent without closing (a network partition, a stuck backend):
notifications stop and nothing says so. Every ``check_interval`` seconds the link
must answer a ``SELECT 1`` within as long; if it does not, it is dropped and
reconnected like a lost one, and every waiter re-checks once it is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import asyncpg

from courier import errors
from courier.db import _translate, pools

log = logging.getLogger(__name__)

FIRST_RETRY_DELAY = 0.05
MAX_RETRY_DELAY = 1.0
CHECK_INTERVAL = 5.0
"""Seconds between checks that the link still answers (and the time it has to)."""
APPLICATION_NAME = "courier-listen"
"""How the link shows in ``pg_stat_activity``."""

LIVENESS_LOCK_CLASS = 1131377778
"""First key of every liveness lock (schema.sql); the second is the instance id
modulo 2**31."""

LOCK = "SELECT pg_try_advisory_lock($1, ($2::bigint % 2147483648)::integer)"
UNLOCK = "SELECT pg_advisory_unlock($1, ($2::bigint % 2147483648)::integer)"

CHANNEL = "courier_messages"
"""Payload ``<queue_id>:<receiver_id>``, the receiver empty for messages to anyone."""
CLIENTS_CHANNEL = "courier_clients"
"""Payload ``<client_id>``: that client was disabled; its sessions end."""


class NotificationListener:
    def __init__(
        self,
        dsn: str,
        on_payload: Callable[[str], None],
        on_restored: Callable[[], None],
        check_interval: float = CHECK_INTERVAL,
        on_disabled: Callable[[int], None] | None = None,
    ) -> None:
        self._dsn = dsn
        self._on_disabled = on_disabled
        self._on_payload = on_payload
        self._on_restored = on_restored
        self._check_interval = check_interval
        self._connection: asyncpg.Connection | None = None
        self._reconnecting: asyncio.Task[None] | None = None
        self._checking: asyncio.Task[None] | None = None
        self._in_use = asyncio.Lock()  # one statement at a time on the link
        self._closed = False
        self._instance_id: int | None = None
        self._locked = False  # this link holds the liveness lock of _instance_id

    @property
    def connected(self) -> bool:
        return self._connection is not None and not self._connection.is_closed()

    async def start(self) -> None:
        """Connect now; raises Unavailable if the database cannot be reached."""
        await self._connect()
        self._checking = asyncio.get_running_loop().create_task(self._check_forever())

    async def hold_liveness_lock(self, instance_id: int) -> None:
        """Hold this instance's liveness lock (instead of any held before) for as long
        as the process lives; after a reconnect it is taken again."""
        previous, self._instance_id = self._instance_id, instance_id
        connection = self._connection
        if connection is None or connection.is_closed():
            return  # the reconnect takes it
        async with self._in_use:
            if previous is not None and self._locked:
                await connection.execute(UNLOCK, LIVENESS_LOCK_CLASS, previous)
            self._locked = await _lock(connection, instance_id)

    async def close(self) -> None:
        self._closed = True
        for task in (self._reconnecting, self._checking):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        connection, self._connection = self._connection, None
        if connection is not None and not connection.is_closed():
            connection.terminate()  # no need to wait for a goodbye from a LISTEN-only link

    async def _connect(self) -> None:
        connection = await pools.connect(
            self._dsn, server_settings={"application_name": APPLICATION_NAME}
        )
        try:
            await connection.add_listener(CHANNEL, self._on_notification)
            if self._on_disabled is not None:
                await connection.add_listener(CLIENTS_CHANNEL, self._on_client_notification)
            self._locked = False
            if self._instance_id is not None:
                self._locked = await _lock(connection, self._instance_id)
            connection.add_termination_listener(self._on_lost)
            if connection.is_closed():  # lost before the listener could hear of it
                raise errors.Unavailable("the LISTEN connection closed as it opened")
        except BaseException:
            connection.terminate()
            raise
        self._connection = connection

    async def _check_forever(self) -> None:
        while not self._closed:
            await asyncio.sleep(self._check_interval)
            connection = self._connection
            if connection is None or connection.is_closed():
                continue  # the reconnect is under way
            if not await self._answers(connection):
                log.warning("the LISTEN connection did not answer within %gs; reconnecting",
                            self._check_interval)  # fmt: skip
                connection.terminate()
                self._on_lost(connection)
            elif self._instance_id is not None and not self._locked:
                await self._retake_lock(connection, self._instance_id)

    async def _retake_lock(self, connection: asyncpg.Connection, instance_id: int) -> None:
        with contextlib.suppress(Exception):  # the next check tries again
            async with self._in_use:
                self._locked = await _lock(connection, instance_id)

    async def _answers(self, connection: asyncpg.Connection) -> bool:
        with contextlib.suppress(Exception):
            async with self._in_use:
                await connection.fetchval("SELECT 1", timeout=self._check_interval)
                return True
        return False

    def _on_notification(self, _connection: Any, _pid: int, _channel: str, payload: str) -> None:
        self._on_payload(payload)

    def _on_client_notification(
        self, _connection: Any, _pid: int, _channel: str, payload: str
    ) -> None:
        if self._on_disabled is not None and payload.isdigit():
            self._on_disabled(int(payload))

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


async def _lock(connection: asyncpg.Connection, instance_id: int) -> bool:
    """Take the liveness lock if it is free (a silent old link may hold it still)."""
    taken: bool = await connection.fetchval(LOCK, LIVENESS_LOCK_CLASS, instance_id)
    return taken
