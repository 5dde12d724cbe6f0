"""One middleware instance, assembled: pool, backend, LISTEN link, registry, listener.

``run`` is what `courier serve` calls: it serves on uvloop until SIGTERM or Ctrl-C,
then stops accepting, finishes the requests in flight, logs sessions out,
unregisters the instance and returns (exit status 0).
"""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import Any

import uvloop

from courier import config, errors, gctuning, protocol, tls
from courier.db import batching, listen, mock, pools, repository, routing
from courier.server import (
    backend,
    connection,
    handlers,
    listener,
    logins,
    logouts,
    measurement_hook,
    metrics,
    node_links,
    registry,
    sweeper,
    waiters,
)

log = logging.getLogger(__name__)

SHUTDOWN_GRACE = 10.0
"""Seconds running requests get to finish after a stop signal."""

HEALTH_POOL = config.PoolSettings(min_size=1, max_size=1, statement_timeout=5.0)
"""One connection of its own for the instance registry."""


class Server:
    def __init__(
        self, settings: config.ServerSettings, recorder: measurement_hook.Recorder | None = None
    ) -> None:
        self.settings = settings
        frame_limit = protocol.frame_limit_for(
            settings.limits.max_body_bytes, settings.limits.max_batch_bytes
        )
        self._metrics = metrics.Metrics() if settings.metrics_port is not None else None
        self._metrics_endpoint: metrics.MetricsEndpoint | None = None
        self._listener = listener.Listener(
            connection.ConnectionSettings(
                frame_limit,
                recorder,
                settings.frame_timeout,
                settings.login_timeout,
                settings.idle_timeout,
                self._metrics,
            ),
            settings.max_clients,
            settings.max_anonymous,
            tls.server_context(settings.tls.cert, settings.tls.key) if settings.tls else None,
        )
        self._waiters = waiters.Waiters()
        self._repo: repository.Repository | None = None
        self._node_links: node_links.NodeLinks | None = None
        self._health: repository.Repository | None = None
        self._notifier: listen.NotificationListener | None = None
        self._registry: registry.InstanceRegistry | None = None
        self._services: handlers.Services | None = None
        self._sweeper: sweeper.Sweeper | None = None
        self._rechecks: set[asyncio.Task[None]] = set()
        self.address = ""

    async def start(self) -> str:
        """Connect, register and start accepting; returns ``host:port``."""
        host, port = await self._listener.bind(self.settings.host, self.settings.port)
        self.address = f"{host}:{port}"
        if self.settings.mock:
            store: backend.Cluster = mock.MockBackend()
            instance_id = 0
        else:
            routed = routing.RoutedBackend(
                await self._open_database(), self.settings.node_service_ms / 1000
            )
            await self._link_nodes(routed)
            health = routing.RoutedInstances(await self._open_health_link(), routed)
            store, instance_id = routed, await self._register(health)
            self._waiters.watch_queues(routed.watch_queue)
            self._sweeper = sweeper.Sweeper(routed)
            self._sweeper.start()
        pending_logouts = logouts.PendingLogouts(
            store, self._current_instance_id, self._listener.serves
        )
        self._services = handlers.Services(
            store, self._waiters, instance_id, self.settings.limits, pending_logouts,
            self._sweeper,
            logins.Logins(self.settings.max_login_failures, open_login=self.settings.open_login),
        )  # fmt: skip
        await self._listener.start(self._services)
        if self._metrics is not None:
            self._serve_metrics(self._metrics)
        return self.address

    def _serve_metrics(self, found: metrics.Metrics) -> None:
        settings = self.settings
        assert settings.metrics_port is not None
        self._listener.watch(found)
        if isinstance(self._repo, batching.BatchedRepository):
            self._repo.watch_batches(found.batch_observer)
        if self._sweeper is not None:
            self._sweeper.on_sweep = found.sweep_observer()
        if self._repo is not None:
            pool = self._repo.pool
            found.watch_pool(
                lambda: pool.get_size() - pool.get_idle_size(), pool.get_idle_size,
                settings.pool.max_size,
            )  # fmt: skip
        try:
            self._metrics_endpoint = found.serve(settings.metrics_host, settings.metrics_port)
        except OSError as exc:
            where = f"{settings.metrics_host}:{settings.metrics_port}"
            raise errors.CourierError(f"cannot serve metrics on {where}: {exc}") from exc
        log.info("metrics on http://%s/metrics", self._metrics_endpoint.address)

    def _current_instance_id(self) -> int:
        assert self._services is not None
        return self._services.instance_id

    async def _open_database(self) -> repository.Repository:
        settings = self.settings
        self._repo = self._repository(await pools.open_pool(settings.dsn, settings.pool))
        self._notifier = listen.NotificationListener(
            settings.dsn, self._waiters.notify_payload, self._listen_restored,
            settings.notify_check, on_disabled=self._listener.end_sessions_of,
        )  # fmt: skip
        await self._notifier.start()
        return self._repo

    def _repository(self, pool: Any) -> repository.Repository:
        """A node's storage over its pool: batched unless --no-batching."""
        settings = self.settings
        kind = batching.BatchedRepository if settings.batching else repository.Repository
        return kind(pool, settings.limits, settings.pool)

    async def _link_nodes(self, routed: routing.RoutedBackend) -> None:
        """Reach the other nodes of a cluster (none for a single database)."""
        self._node_links = node_links.NodeLinks(
            self.settings, routed, self._repository, self._waiters, self._current_instance_id
        )
        await self._node_links.start()

    def _listen_restored(self) -> None:
        """Notifications sent while the LISTEN link was down are lost: every waiter
        re-checks, and the clients disabled meanwhile lose their sessions now."""
        self._waiters.wake_all()
        recheck = asyncio.get_running_loop().create_task(self._end_disabled_sessions())
        self._rechecks.add(recheck)
        recheck.add_done_callback(self._rechecks.discard)

    async def _end_disabled_sessions(self) -> None:
        logged_in = self._listener.logged_in_clients()
        if self._repo is None or not logged_in:
            return
        try:
            disabled = await self._repo.disabled_clients(sorted(logged_in))
        except errors.CourierError as exc:
            log.warning("cannot check for clients disabled while LISTEN was down: %s", exc)
            return
        for client_id in disabled:
            self._listener.end_sessions_of(client_id)

    async def _open_health_link(self) -> repository.Repository:
        """The registry's own database connection: heartbeats and the search for dead
        instances never wait behind requests for the pool, so a busy instance is never
        taken for a dead one."""
        self._health = repository.Repository(
            await pools.open_pool(self.settings.dsn, HEALTH_POOL), self.settings.limits, HEALTH_POOL
        )
        return self._health

    async def _register(self, store: backend.InstanceStore) -> int:
        settings = self.settings
        self._registry = registry.InstanceRegistry(
            store, self.address, settings.heartbeat_interval, settings.instance_ttl
        )
        self._registry.on_reregistered = self._reclaim_sessions
        if self._notifier is not None:
            self._registry.on_registered = self._notifier.hold_liveness_lock
        return await self._registry.register()

    async def _reclaim_sessions(self, old_instance_id: int, new_instance_id: int) -> None:
        assert self._services is not None
        self._services.instance_id = new_instance_id
        await self._listener.reclaim_sessions(old_instance_id, new_instance_id)

    async def stop(self) -> None:
        """Stop accepting, finish what is running, log out, unregister, disconnect."""
        self._listener.stop_accepting()
        self._waiters.stop()
        await self._listener.stop_connections(SHUTDOWN_GRACE)
        if self._services is not None:
            await self._services.logouts.stop()  # unregistering releases what is left
        if self._registry is not None:
            try:
                await self._registry.unregister()
            except Exception as exc:
                log.warning("could not unregister the instance: %s", exc)
        if self._sweeper is not None:
            await self._sweeper.stop()
        if self._notifier is not None:
            await self._notifier.close()
        if self._node_links is not None:
            await self._node_links.stop()
        for repo in (self._repo, self._health):
            if repo is not None:
                await repo.close()
        if self._metrics_endpoint is not None:
            await asyncio.to_thread(self._metrics_endpoint.close)


async def serve(
    settings: config.ServerSettings, recorder: measurement_hook.Recorder | None = None
) -> None:
    """Serve until SIGTERM or SIGINT, then shut down gracefully."""
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    server = Server(settings, recorder)
    try:
        address = await server.start()
        log.info("Courier middleware listening on %s", address)
        await stopping.wait()
        log.info("stopping: finishing requests in flight")
    finally:
        await server.stop()
    log.info("stopped")


def run(settings: config.ServerSettings, recorder: measurement_hook.Recorder | None = None) -> None:
    gctuning.tune_for_serving()
    uvloop.run(serve(settings, recorder))
