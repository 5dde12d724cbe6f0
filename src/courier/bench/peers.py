"""The systems of `courier bench peers`, each run over the same closed loop.

``courier``     Courier through its middleware: M `courier serve` processes, clients
                spread round-robin over them, each an ``AsyncClient`` logged in
                under its own registered name.
``courier-db``  Courier's database tier called directly, no middleware: each client
                process has a ``Repository`` whose pool holds one connection per
                client, and its clients call ``send`` and ``read(pop=True)``.
``rabbitmq``    the peer broker (``courier.bench.rabbit``).

A system is used as ``async with system.running(most_clients)`` (processes and
client identities for the whole sweep), then ``async with system.level(n) as
target`` per level (a fresh, empty queue, deleted afterwards). Either may raise
``Skipped`` when it cannot run here; the sweep says why and goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from courier import certificates, config, errors, models
from courier.bench import database, defaults, loop
from courier.client import AsyncClient
from courier.db import pools, repository
from courier.lab import setup
from courier.server import launcher

REGISTER_CONNECTIONS = 4
LOGINS_AT_ONCE = 32
"""Clients of one process that log in at the same time."""


class Skipped(Exception):
    """A system, or one level of it, cannot run here; the message says why."""


class System(Protocol):
    name: str
    version: str  # of a peer's server, once running (empty for Courier's own)

    def running(self, most_clients: int) -> contextlib.AbstractAsyncContextManager[None]: ...

    def level(self, clients: int) -> contextlib.AbstractAsyncContextManager[loop.Target]: ...


def client_names(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{index:04d}" for index in range(count)]


# -- Courier through the middleware ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CourierTarget:
    servers: tuple[str, ...]
    queue_id: int
    names: tuple[str, ...]
    batch: int = 1
    secrets: tuple[str, ...] = ()
    """Each name's secret, in order (none: the servers take open logins)."""
    persistent: bool = True
    """False: every message skips the database's write-ahead log."""
    ca: str | None = None
    """The CA of the servers' certificate (None: plaintext)."""

    async def open(
        self, clients: Sequence[int], body: str, stack: contextlib.AsyncExitStack
    ) -> list[loop.Peer]:
        # A login with a secret costs the client a key derivation: a thousand at once
        # would hold their connections anonymous long enough to be pushed out.
        logging_in = asyncio.Semaphore(LOGINS_AT_ONCE)

        async def connect(index: int) -> loop.Peer:
            first = index % len(self.servers)  # round-robin; the others for failover
            ordered = ",".join(self.servers[first:] + self.servers[:first])
            secret = self.secrets[index] if self.secrets else None
            opening = AsyncClient.connect(
                ordered, name=self.names[index], secret=secret, ca=self.ca
            )
            async with logging_in:
                client = await stack.enter_async_context(opening)
            if self.batch > 1:
                return CourierBatchPeer(client, self.queue_id, [body] * self.batch, self.persistent)
            return CourierPeer(client, self.queue_id, body, self.persistent)

        return list(await asyncio.gather(*(connect(index) for index in clients)))


@dataclass(frozen=True, slots=True)
class CourierPeer:
    client: AsyncClient
    queue_id: int
    body: str
    persistent: bool = True

    async def send(self) -> int:
        await self.client.send(self.queue_id, self.body, persistent=self.persistent)
        return 1

    async def pop(self) -> int:
        return await self.client.pop(self.queue_id) is not None


@dataclass(frozen=True, slots=True)
class CourierBatchPeer:
    """send_many of a whole batch, then pop_many of as many."""

    client: AsyncClient
    queue_id: int
    bodies: list[str]
    persistent: bool = True

    async def send(self) -> int:
        sent = await self.client.send_many(self.queue_id, self.bodies, persistent=self.persistent)
        return len(sent)

    async def pop(self) -> int:
        return len(await self.client.pop_many(self.queue_id, len(self.bodies)))


@dataclass(slots=True)
class Courier:
    dsn: str
    prefix: str
    log_dir: Path
    middlewares: int = defaults.MIDDLEWARES
    pool_size: int = defaults.SERVE.pool.max_size
    batch: int = 1
    open_login: bool = False
    """Log in by name alone (no secrets), on servers that allow it."""
    tls: bool = False
    """Speak TLS, with a certificate from a CA made for the run."""
    persistent: bool = True
    """False: every message skips the database's write-ahead log."""
    name: str = defaults.COURIER
    version: str = ""
    _servers: list[str] = field(default_factory=list)
    _setup: setup.Setup | None = None
    _ca: Path | None = None

    @contextlib.asynccontextmanager
    async def running(self, most_clients: int) -> AsyncIterator[None]:
        started: list[launcher.Middleware] = []
        tls = self._certificates()
        try:
            for _ in range(self.middlewares):
                started.append(self._middleware(most_clients, tls))
            await asyncio.gather(*(process.ready() for process in started))
            self._servers = [process.address for process in started]
            prepared_setup = setup.Setup(
                self._servers, None, f"{self.prefix}-setup",
                with_secrets=not self.open_login, ca=self._ca,
            )  # fmt: skip
            async with prepared_setup as prepared:
                await prepared.register(client_names(self.prefix, most_clients))
                self._setup = prepared
                yield
        finally:
            self._setup = None
            await asyncio.gather(*(process.stopped() for process in started))

    def _certificates(self) -> dict[str, object]:
        """The middleware's TLS flags (none without ``tls``)."""
        if not self.tls:
            return {}
        made = certificates.make_local(self.log_dir / "tls")
        self._ca = made.ca
        return {"tls_cert": made.cert, "tls_key": made.key, "ca": made.ca}

    def _middleware(self, most_clients: int, tls: dict[str, object]) -> launcher.Middleware:
        # Every client of the largest level must find a place on its middleware.
        per_middleware = math.ceil(most_clients / self.middlewares) + 8
        return launcher.Middleware.start(
            self.log_dir, port=None, inherit_settings=False, dsn=self.dsn, pool_size=self.pool_size,
            max_clients=max(defaults.SERVE.max_clients, per_middleware),
            open_login=self.open_login, **tls,
        )  # fmt: skip

    @contextlib.asynccontextmanager
    async def level(self, clients: int) -> AsyncIterator[loop.Target]:
        assert self._setup is not None, "level() inside running() only"
        queue = await self._setup.queue(f"{self.prefix}-{clients}")
        try:
            names = tuple(client_names(self.prefix, clients))
            kept = self._setup.secrets
            yield CourierTarget(
                tuple(self._servers), queue.id, names, self.batch,
                secrets=tuple(kept[name] for name in names) if kept else (),
                ca=str(self._ca) if self._ca is not None else None, persistent=self.persistent,
            )  # fmt: skip
        finally:
            await self._setup.client.delete_queue(queue.id)


# -- Courier's database tier, directly ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class DatabaseTarget:
    dsn: str
    queue_id: int
    client_ids: tuple[int, ...]
    batch: int = 1
    persistent: bool = True

    async def open(
        self, clients: Sequence[int], body: str, stack: contextlib.AsyncExitStack
    ) -> list[loop.Peer]:
        # One connection per client, as if each held its own; released as the
        # middleware's are, without a reset round trip.
        pool = await pools.create_pool(self.dsn, len(clients), len(clients))
        stack.push_async_callback(pool.close)
        repo = repository.Repository(pool)
        return [
            DatabasePeer(
                repo,
                self.client_ids[index],
                self.queue_id,
                body.encode(),
                batch=self.batch,
                persistent=self.persistent,
            )
            for index in clients
        ]


@dataclass(frozen=True, slots=True)
class DatabasePeer:
    repo: repository.Repository
    client_id: int
    queue_id: int
    body: bytes
    batch: int = 1
    persistent: bool = True

    async def send(self) -> int:
        if self.batch > 1:
            drafts = [models.Draft(self.body, persistent=self.persistent)] * self.batch
            return len(await self.repo.send_many(self.client_id, [self.queue_id], drafts))
        options = repository.SendOptions(persistent=self.persistent)
        await self.repo.send(self.client_id, [self.queue_id], self.body, options=options)
        return 1

    async def pop(self) -> int:
        if self.batch > 1:
            return len(await self.repo.pop_many(self.client_id, self.queue_id, self.batch))
        try:
            await self.repo.read(self.client_id, queue_id=self.queue_id, pop=True)
        except errors.QueueEmpty:
            return 0
        return 1


@dataclass(slots=True)
class CourierDatabase:
    dsn: str
    prefix: str
    batch: int = 1
    persistent: bool = True
    name: str = defaults.COURIER_DB
    version: str = ""
    _repo: repository.Repository | None = None
    _ids: list[int] = field(default_factory=list)

    @contextlib.asynccontextmanager
    async def running(self, most_clients: int) -> AsyncIterator[None]:
        pool = config.PoolSettings(min_size=1, max_size=REGISTER_CONNECTIONS)
        self._repo = await repository.Repository.connect(self.dsn, pool)
        try:
            self._ids = await self._register(client_names(self.prefix, most_clients))
            yield
        finally:
            await self._repo.close()
            self._repo = None

    async def _register(self, names: Sequence[str]) -> list[int]:
        assert self._repo is not None
        infos = await asyncio.gather(*(self._repo.register_client(name) for name in names))
        return [info.id for info in infos]

    @contextlib.asynccontextmanager
    async def level(self, clients: int) -> AsyncIterator[loop.Target]:
        assert self._repo is not None, "level() inside running() only"
        spare, most = await database.spare_connections(self.dsn)
        if clients > spare:
            raise Skipped(
                f"{self.name} at {clients} clients needs {clients} database connections;"
                f" {spare} are free (max_connections {most}): skipped"
            )
        queue = await self._repo.create_queue(f"{self.prefix}-{clients}")
        try:
            yield DatabaseTarget(
                self.dsn, queue.id, tuple(self._ids[:clients]), self.batch, self.persistent
            )
        finally:
            await self._repo.delete_queue(queue.id)
