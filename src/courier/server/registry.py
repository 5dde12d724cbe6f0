"""This instance's entry in the database's instance registry, kept alive by heartbeats.

Every ``heartbeat_interval`` the instance refreshes its heartbeat and expires
instances silent for longer than ``instance_ttl``, which releases their sessions:
that is how the survivors clean up after an instance that died without saying so.
The task outlives database outages; it logs them and tries again next beat.

An instance cut off from the database for longer than the ttl may find on its
return that a survivor expired it. It then registers again under a new id and hands
both ids to ``on_reregistered``, which reclaims the sessions it still serves.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from courier import errors
from courier.server import backend

log = logging.getLogger(__name__)


Reregistered = Callable[[int, int], Awaitable[None]]
"""Called with (old instance id, new instance id) after registering again."""


class InstanceRegistry:
    def __init__(
        self, store: backend.InstanceStore, address: str, interval: float, ttl: float
    ) -> None:
        self._store = store
        self.address = address
        self._interval = interval
        self._ttl = ttl
        self.instance_id = 0
        self.on_reregistered: Reregistered | None = None
        self._beating: asyncio.Task[None] | None = None

    async def register(self) -> int:
        """Register and start the heartbeat; returns the instance id."""
        await self._register()
        self._beating = asyncio.get_running_loop().create_task(self._beat_forever())
        return self.instance_id

    async def _register(self) -> None:
        instance = await self._store.register_instance(self.address, ttl_seconds=self._ttl)
        self.instance_id = instance.id

    async def unregister(self) -> None:
        """Stop beating and remove this instance, releasing its sessions."""
        if self._beating is not None:
            self._beating.cancel()
            await asyncio.gather(self._beating, return_exceptions=True)
            self._beating = None
        if self.instance_id:
            await self._store.unregister_instance(self.instance_id)
            self.instance_id = 0

    async def _beat_forever(self) -> None:
        healthy = True
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.beat()
            except Exception as exc:
                if healthy or not backend.is_outage(exc):
                    log.warning("heartbeat failed: %s", exc, exc_info=not backend.is_outage(exc))
                healthy = False
                continue
            if not healthy:
                log.info("heartbeat restored")
                healthy = True

    async def beat(self) -> None:
        try:
            await self._store.heartbeat(self.instance_id)
        except errors.InternalError:
            # The registry no longer knows this instance: it was expired while away.
            await self._register_again()
        expired = await self._store.expire_instances(self._ttl)
        if expired:
            log.info("expired silent instances %s; their sessions are released", expired)

    async def _register_again(self) -> None:
        old_id = self.instance_id
        await self._register()
        log.warning("instance %d was expired; registered again as %d", old_id, self.instance_id)
        if self.on_reregistered is not None:
            await self.on_reregistered(old_id, self.instance_id)
        # Whatever the old entry still holds is ours to release.
        await self._store.unregister_instance(old_id)
