"""Sessions whose release failed (the database was out of reach when their
connection closed) are released again later, never forgotten.

Until then the client stays online on this instance and cannot log in elsewhere
(CLIENT_ONLINE), so every ``RETRY_INTERVAL`` each waiting session is released
again: its leases go back and its session ends. A client that has meanwhile logged
in again through this same instance is left alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from courier.server import backend

log = logging.getLogger(__name__)

RETRY_INTERVAL = 1.0


class PendingLogouts:
    def __init__(
        self,
        store: backend.Backend,
        instance_id: Callable[[], int],
        connected: Callable[[int], bool],
    ) -> None:
        self._store = store
        self._instance_id = instance_id
        self._connected = connected
        self._clients: set[int] = set()
        self._retrying: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._clients)

    async def end_session(self, client_id: int) -> None:
        """The client's connection closed without LOGOUT: its leases go back and its
        session ends, now, or later if the database cannot be reached now."""
        if not await self._released(client_id):
            self._add(client_id)

    def _add(self, client_id: int) -> None:
        self._clients.add(client_id)
        if self._retrying is None or self._retrying.done():
            self._retrying = asyncio.get_running_loop().create_task(self._retry_until_empty())

    async def stop(self) -> None:
        if self._retrying is not None:
            self._retrying.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._retrying

    async def _retry_until_empty(self) -> None:
        while self._clients:
            await asyncio.sleep(RETRY_INTERVAL)
            for client_id in sorted(self._clients):
                if self._connected(client_id):
                    self._clients.discard(client_id)
                elif await self._released(client_id):
                    self._clients.discard(client_id)
                    log.info("client %d logged out after an earlier failure", client_id)

    async def _released(self, client_id: int) -> bool:
        instance_id = self._instance_id()
        try:
            await self._store.release_leases(client_id, instance_id)
            await self._store.logout(client_id, instance_id)
        except Exception as exc:
            log.warning("could not log client %d out (will try again): %s", client_id, exc)
            return False
        return True
