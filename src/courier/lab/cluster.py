"""Cluster experiments: replicated queues over several nodes (`courier lab cluster`).

A spec names the cluster (nodes, middleware, each node's service time), the
replicated queue (members, policy), the controller's rules (or none), and the
clients: producers and consumers, each with a quota of messages, joining all at
once or one after another in a given order of roles. One factor may vary between
runs (``[factors]``, e.g. ``policy = ["balanced", "round_robin"]``).

Each run gets fresh databases on one local PostgreSQL (the nodes), recording
middleware, the controller in this process (its member samples and decisions are
records too, so a run without provisioning still gets samples), and the clients
as tasks of this process, each a recorded ``AsyncClient``. A run ends when every
consumer has its quota, or at ``max_duration_s``. docs/nodes.md has the specs of
the study's two experiments and how to spread the nodes over several machines.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import time
import tomllib
import urllib.parse
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

from courier import controller, errors, models
from courier.client.async_client import AsyncClient
from courier.db import embedded, nodes, schema
from courier.lab import process_recording
from courier.measurements import manifest, parquet, record_schema
from courier.server import launcher

CONTROLLER_KINDS = (record_schema.REPLICA_SAMPLES, record_schema.CLUSTER_DECISIONS)
ROLES = {"P": models.Role.PRODUCER, "C": models.Role.CONSUMER}


class ClusterSpecError(errors.BadRequest):
    """The cluster experiment spec is invalid."""


@dataclass(frozen=True, slots=True)
class ClusterRun:
    """Every parameter of one run; the spec's sections fill it, a factor overrides one."""

    nodes: int = 2
    admin_dsns: tuple[str, ...] = ()
    """PostgreSQL servers to make the nodes' databases on, node k on the
    ((k - 1) mod n)-th; none: the experiment's own embedded server."""
    middleware: int = 2
    node_service_ms: float = 0.0
    replicas: int = 2
    policy: str = "balanced"
    producers: int = 4
    consumers: int = 8
    messages_per_producer: int = 1000
    messages_per_consumer: int = 500
    message_size: int = 200
    order: str = "PCC"
    """Roles in joining order, repeated: P producer, C consumer."""
    join_every_s: float = 0.0
    """0: all join at once; else one client joins every so many seconds."""
    max_duration_s: float = 300.0
    provision: bool = False
    capacity: int = 8
    high: float = 1.0
    low: float = 0.5
    inhibition_s: float = 10.0
    move_above: int = 100
    move_at_most: int = 1000
    interval_s: float = 1.0

    def rules(self) -> controller.Rules:
        """The controller's rules; without provisioning it only samples and moves."""
        high = self.high if self.provision else float("inf")
        low = self.low if self.provision else 0.0
        return controller.Rules(
            self.capacity, high, low, self.inhibition_s, self.move_above, self.move_at_most
        )

    def arrivals(self) -> list[models.Role]:
        """Each client's role, in joining order, by repeating ``order``."""
        wanted = {"P": self.producers, "C": self.consumers}
        joined: list[models.Role] = []
        while any(wanted.values()):
            progressed = False
            for letter in self.order:
                if wanted[letter]:
                    wanted[letter] -= 1
                    joined.append(ROLES[letter])
                    progressed = True
            if not progressed:  # the order names only roles already complete
                joined += [ROLES[k] for k, n in wanted.items() for _ in range(n)]
                break
        return joined


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    name: str
    base: ClusterRun
    factor: str | None = None
    levels: tuple[Any, ...] = ()

    def runs(self) -> list[tuple[str, ClusterRun, dict[str, Any]]]:
        """(run id, parameters, levels) of each run."""
        if self.factor is None:
            return [("r000", self.base, {})]
        return [
            (f"r{n:03d}", dataclasses.replace(self.base, **{self.factor: level}),
             {self.factor: level})
            for n, level in enumerate(self.levels)
        ]  # fmt: skip


def load(path: Path) -> ClusterSpec:
    """Read a spec: ``name``, sections ``[cluster]``, ``[clients]``, ``[controller]``
    (their keys are ``ClusterRun``'s fields) and at most one factor in ``[factors]``."""
    try:
        document = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ClusterSpecError(f"{path}: {exc}") from exc
    known = {f.name for f in dataclasses.fields(ClusterRun)}
    values: dict[str, Any] = {}
    for section in ("cluster", "clients", "controller"):
        for key, value in document.get(section, {}).items():
            if key not in known:
                raise ClusterSpecError(f"{path}: [{section}] {key} is not a parameter")
            values[key] = tuple(value) if isinstance(value, list) else value
    factors = document.get("factors", {})
    if len(factors) > 1 or any(key not in known for key in factors):
        raise ClusterSpecError(f"{path}: [factors] takes one parameter of {sorted(known)}")
    base = _checked(path, ClusterRun(**values))
    factor, levels = next(iter(factors.items()), (None, []))
    spec = ClusterSpec(str(document.get("name", path.stem)), base, factor, tuple(levels))
    for _, run, _ in spec.runs():
        _checked(path, run)
    return spec


def _checked(path: Path, run: ClusterRun) -> ClusterRun:
    problems = [
        (run.nodes < 1, "nodes must be at least 1"),
        (not 1 <= run.replicas <= run.nodes, "replicas must be 1 to nodes"),
        (run.policy not in {p.value for p in models.Policy}, "policy: balanced or round_robin"),
        (not run.order or set(run.order) - set(ROLES), "order: letters P and C"),
        (run.producers < 1 or run.consumers < 1, "at least one producer and one consumer"),
        (run.producers * run.messages_per_producer < run.consumers * run.messages_per_consumer,
         "the consumers' quotas exceed what the producers send"),
    ]  # fmt: skip
    for failed, why in problems:
        if failed:
            raise ClusterSpecError(f"{path}: {why}")
    return run


# -- running ------------------------------------------------------------------------


@dataclass
class Progress:
    """What a run has done so far; the reporter shows it."""

    sent: int = 0
    received: int = 0
    joined: int = 0


async def run_experiment(
    spec: ClusterSpec,
    out: Path,
    *,
    report: Callable[[str, ClusterRun, Progress], None] = lambda *args: None,
) -> Path:
    """Every run of the spec, one after another; returns the experiment directory."""
    directory = out / spec.name
    directory.mkdir(parents=True, exist_ok=True)
    runs: list[manifest.Run] = []
    factors = {spec.factor: list(spec.levels)} if spec.factor else {}
    with _servers(spec.base.admin_dsns, directory / "pg") as admin_dsns:
        for run_id, parameters, levels in spec.runs():
            progress = Progress()
            began = time.time_ns()
            tick = functools.partial(report, run_id, parameters, progress)
            await run_once(parameters, admin_dsns, directory / run_id, run_id, tick, progress)
            runs.append(manifest.Run(run_id, levels, start_ns=began, end_ns=time.time_ns()))
            manifest.Manifest(manifest.path_in(directory), spec.name, factors, tuple(runs)).write()
    return directory


@contextlib.contextmanager
def _servers(given: tuple[str, ...], home: Path) -> Iterator[tuple[str, ...]]:
    """The servers named in the spec, else the experiment's own durable PostgreSQL
    (stopped afterwards)."""
    if given:
        yield given
        return
    server = embedded.EmbeddedPostgres(home)
    server.start()
    try:
        yield (server.admin_dsn,)
    finally:
        server.stop()


async def run_once(
    run: ClusterRun,
    admin_dsns: tuple[str, ...],
    run_dir: Path,
    run_id: str,
    tick: Callable[[], None],
    progress: Progress,
) -> None:
    dsns = await _fresh_nodes(admin_dsns, run.nodes, run_id)
    async with _middleware(run, dsns[0], run_dir, run_id) as addresses:
        await _prepare(addresses[0], run)
        writer = parquet.RecordWriter(run_dir, "controller", CONTROLLER_KINDS).start()
        recording = process_recording.ProcessRecording.for_clients(run_dir, run_id, "load-0")
        provisioner = controller.Controller(
            dsns[0], run.rules(), recorder=writer.append, run_id=run_id
        )
        await provisioner.start()
        stop = asyncio.Event()
        controlling = asyncio.create_task(provisioner.run(run.interval_s, stop))
        try:
            await _clients(run, addresses, recording, progress, tick)
        finally:
            stop.set()
            await controlling
            await provisioner.close()
            writer.close()
            recording.close()


async def _fresh_nodes(admin_dsns: tuple[str, ...], count: int, run_id: str) -> list[str]:
    """Empty databases for the run's nodes, migrated; nodes 2.. joined to node 1."""
    dsns = []
    for n in range(1, count + 1):
        admin_dsn, name = admin_dsns[(n - 1) % len(admin_dsns)], f"courier_{run_id}_node{n}"
        connection = await asyncpg.connect(admin_dsn)
        try:
            await connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            await connection.execute(f'CREATE DATABASE "{name}"')
        finally:
            await connection.close()
        dsns.append(_with_database(admin_dsn, name))
    await schema.migrate(dsns[0])
    for dsn in dsns[1:]:
        await nodes.add_node(dsns[0], dsn)
    return dsns


def _with_database(dsn: str, name: str) -> str:
    """The DSN with another database: its path, whatever the query after it names
    (a Unix socket's directory has slashes of its own)."""
    parts = urllib.parse.urlsplit(dsn)
    return urllib.parse.urlunsplit(parts._replace(path=f"/{name}"))


@contextlib.asynccontextmanager
async def _middleware(
    run: ClusterRun, dsn: str, run_dir: Path, run_id: str
) -> AsyncIterator[list[str]]:
    started = [
        launcher.Middleware.start(
            run_dir / "logs", dsn=dsn, record_dir=run_dir, run_id=run_id, open_login=True,
            node_service_ms=run.node_service_ms or None, max_clients=4096,
        )
        for _ in range(run.middleware)
    ]  # fmt: skip
    try:
        for middleware in started:
            await middleware.ready()
        yield [middleware.address for middleware in started]
    finally:
        for middleware in started:
            await asyncio.to_thread(middleware.stop)


async def _prepare(address: str, run: ClusterRun) -> None:
    async with AsyncClient.connect(address) as admin:
        for name in _client_names(run):
            await admin.register(name)
        await admin.login(name=_client_names(run)[0])
        await admin.create_replicated_queue("work", run.replicas, policy=run.policy)


def _client_names(run: ClusterRun) -> list[str]:
    return [f"{role.value}-{n}" for n, role in enumerate(run.arrivals())]


async def _clients(
    run: ClusterRun,
    addresses: list[str],
    recording: process_recording.ProcessRecording,
    progress: Progress,
    tick: Callable[[], None],
) -> None:
    roles = run.arrivals()
    producing = asyncio.Event()
    remaining = [sum(role is models.Role.PRODUCER for role in roles)]
    deadline = time.monotonic() + run.max_duration_s

    def produced() -> None:
        remaining[0] -= 1
        if not remaining[0]:
            producing.set()

    async def client(n: int, role: models.Role) -> None:
        await asyncio.sleep(n * run.join_every_s)
        name = _client_names(run)[n]
        async with AsyncClient.connect(
            addresses[n % len(addresses)], name=name, recorder=recording.client_recorder(role.value)
        ) as connected:
            progress.joined += 1
            if role is models.Role.PRODUCER:
                await _produce(connected, run, progress, tick, deadline)
                produced()
            else:
                await _consume(connected, run, progress, tick, deadline, producing)

    async with asyncio.TaskGroup() as group:
        for n, role in enumerate(roles):
            group.create_task(client(n, role))


async def _produce(
    client: AsyncClient, run: ClusterRun, progress: Progress, tick: Callable[[], None],
    deadline: float,
) -> None:  # fmt: skip
    body = b"x" * run.message_size
    async with await client.producer("work") as producer:
        for _ in range(run.messages_per_producer):
            if time.monotonic() > deadline:
                return
            await producer.send(body)
            progress.sent += 1
            tick()


async def _consume(
    client: AsyncClient, run: ClusterRun, progress: Progress, tick: Callable[[], None],
    deadline: float, producing: asyncio.Event,
) -> None:  # fmt: skip
    """Take the quota; stop early once every producer is done and every message sent
    has been taken. The clients count both, because the queues' counts miss a message
    the controller is moving between members (it sits in the source node's outbox)."""
    async with await client.consumer("work") as consumer:
        taken = 0
        while taken < run.messages_per_consumer and time.monotonic() < deadline:
            message = await consumer.receive(timeout=1.0)
            if message is None:
                if producing.is_set() and progress.received >= progress.sent:
                    return
                continue
            taken += 1
            progress.received += 1
            tick()
