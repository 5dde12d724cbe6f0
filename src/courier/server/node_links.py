"""The middleware's links to the other database nodes of a cluster.

Every second the control node's list of nodes is read again: a node that joined
gets a pool (the same kind as the control node's) and a LISTEN link whose
notifications wake this middleware's waiters, and the routed backend starts
sending it requests; a removed node is let go. A node out of reach is logged and
tried again at the next look; meanwhile requests for it get UNAVAILABLE. The same
round learns which queues are members of replicated queues and reports this
middleware's traffic to them (the controller's rates).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from courier import config, errors
from courier.db import listen, nodes, pools, routing
from courier.server import waiters

log = logging.getLogger(__name__)

REFRESH_INTERVAL = 1.0
"""Seconds between two looks at the control node's list of nodes."""


class NodeLinks:
    def __init__(
        self,
        settings: config.ServerSettings,
        routed: routing.RoutedBackend,
        open_repository: Callable[[Any], Any],
        woken: waiters.Waiters,
        instance_id: Callable[[], int],
        interval: float = REFRESH_INTERVAL,
    ) -> None:
        self._settings = settings
        self._routed = routed
        self._open_repository = open_repository
        self._waiters = woken
        self._instance_id = instance_id
        self._interval = interval
        self._links: dict[int, tuple[Any, listen.NotificationListener, str]] = {}
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Link the nodes there are now, then keep watching for changes."""
        await self.link_nodes()
        self._task = asyncio.get_running_loop().create_task(self._watch())

    async def refresh(self) -> None:
        await self.link_nodes()
        try:
            await self._routed.watch_members()
            await self._routed.report_counts(self._instance_id())
        except errors.CourierError as exc:
            log.warning("cannot report the traffic of replicated queues: %s", exc)

    async def link_nodes(self) -> None:
        try:
            found = await self._routed.control.cluster_nodes()
        except errors.CourierError as exc:
            log.warning("cannot read the list of nodes: %s", exc)
            return
        wanted = {node.id: node for node in nodes.active(found) if node.id != nodes.CONTROL_NODE}
        moved = {
            n for n, node in wanted.items() if n in self._links and self._links[n][2] != node.dsn
        }
        for node_id in sorted(set(self._links) - set(wanted) | moved):
            await self._let_go(node_id)  # gone, or its server now answers elsewhere
        for node_id, node in sorted(wanted.items()):
            if node_id not in self._links:
                await self._link(node)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.refresh()
            except Exception:  # the watch must outlive any one failure
                log.exception("looking at the nodes failed")

    async def _link(self, node: nodes.Node) -> None:
        settings = self._settings
        try:
            pool = await pools.open_pool(node.dsn, settings.pool)
        except errors.CourierError as exc:
            log.warning("cannot reach node %d: %s", node.id, exc)
            return
        notifier = listen.NotificationListener(
            node.dsn, self._waiters.notify_payload, self._waiters.wake_all, settings.notify_check
        )
        try:
            await notifier.start()
        except errors.CourierError as exc:
            log.warning("cannot listen on node %d: %s", node.id, exc)
            await pools.close_pool(pool)
            return
        try:
            await nodes.copy_clients(settings.dsn, node.dsn)  # those registered meanwhile
        except errors.CourierError as exc:
            log.warning("cannot copy the clients to node %d: %s", node.id, exc)
        repository = self._open_repository(pool)
        self._links[node.id] = (repository, notifier, node.dsn)
        self._routed.attach(node.id, repository)
        self._waiters.wake_all()  # a waiter may wait for a queue this node holds
        log.info("linked to node %d", node.id)

    async def _let_go(self, node_id: int) -> None:
        repository, notifier, _ = self._links.pop(node_id)
        self._routed.detach(node_id)
        await notifier.close()
        await repository.close()
        log.info("let go of node %d", node_id)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for node_id in sorted(self._links):
            await self._let_go(node_id)
