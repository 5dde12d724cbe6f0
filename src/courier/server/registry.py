"""This instance's entry in the database's instance registry, kept alive by heartbeats.

Every ``heartbeat_interval`` the instance refreshes its heartbeat and expires
instances silent for longer than ``instance_ttl``, which releases their sessions
and leases: that is how the survivors clean up after an instance that was cut off.
A process that dies is noticed much sooner: every ``REAP_INTERVAL`` the instance
removes the others whose liveness lock is free (``on_registered`` takes this
instance's own lock, see ``courier.db.listen``). The tasks outlive database
outages; they log them and try again.

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

Registered = Callable[[int], Awaitable[None]]
"""Called with the instance id after every registration, before serving under it."""

REAP_INTERVAL = 0.25
"""Seconds between looks for instances that are gone."""


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
        self.on_registered: Registered | None = None
        self._tasks: list[asyncio.Task[None]] = []

    async def register(self) -> int:
        """Register and start the heartbeat and the reaper; returns the instance id."""
        await self._register()
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._beat_forever()),
            loop.create_task(self._reap_forever()),
        ]
        return self.instance_id

    async def _register(self) -> None:
        instance = await self._store.register_instance(self.address, ttl_seconds=self._ttl)
        self.instance_id = instance.id
        if self.on_registered is not None:
            await self.on_registered(instance.id)

    async def unregister(self) -> None:
        """Stop beating and reaping and remove this instance, releasing its sessions."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
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

    async def _reap_forever(self) -> None:
        while True:
            await asyncio.sleep(REAP_INTERVAL)
            try:
                reaped = await self._store.reap_instances(self.instance_id)
            except Exception as exc:
                if not backend.is_outage(exc):
                    log.warning("looking for dead instances failed: %s", exc, exc_info=True)
                continue
            if reaped:
                log.info("instances %s are gone; their sessions and leases are released", reaped)

    async def beat(self) -> None:
        try:
            await self._store.heartbeat(self.instance_id)
        except errors.InternalError:
            # The registry no longer knows this instance: it was expired while away.
            await self._register_again()
        expired = await self._store.expire_instances()
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
