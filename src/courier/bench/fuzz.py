"""`courier bench fuzz`: a million broken frames, and a client that must not notice.

The run starts a fresh durable embedded PostgreSQL and its own middleware (with
``--frame-timeout``, short so that stalls resolve quickly), or fuzzes the servers
of ``--servers``. It then

1. opens one well-behaved client per server (``fuzzgood.GoodClient``), which
   registers, logs in and creates a queue of its own, and registers the fuzzers'
   targets: a few clients and queues the valid frames name;
2. runs ``connections`` fuzzing connections at once, round-robin over the servers,
   one after another per slot until ``frames`` frames are sent
   (``fuzzclients.fuzz_slot``), while each good client sends numbered messages to
   itself and receives them, and the servers' resident memory is sampled;
3. stops, lets each good client take what is left in its queue, and checks every
   server: still running, and accepting a new client that PINGs.

It fails (the CLI exits 1) when a server died or stopped accepting, a good client
saw an error or lost a message, a server's memory kept growing (the peak of the
second half of the run over the first half's by more than a quarter plus 32 MiB),
a reply was malformed, or a connection ended in a way a server keeping to its
protocol never causes (``fuzzclients.PROBLEMS``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import random
import secrets
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy
import psutil

from courier import config, errors
from courier.bench import database, defaults, fuzzclients, fuzzframes, fuzzgood, progress, results
from courier.client import AsyncClient
from courier.server import launcher

NAME = "fuzz"
SAMPLE_EVERY_S = 0.25
SETTLE_S = 0.5
ACCEPT_TIMEOUT_S = 5.0
GROWTH_SHARE = 0.25
GROWTH_SLACK = 32 * 1024 * 1024
"""Memory counts as bounded when the second half's peak is within these of the first's."""
TARGET_CLIENTS = 4
TARGET_QUEUES = 8
ABSENT_ID = 2**40 + 7
"""An id no client or queue has: frames that name it get NOT_FOUND."""
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True, slots=True)
class Settings:
    frames: int = defaults.FUZZ_FRAMES
    connections: int = defaults.FUZZ_CONNECTIONS
    middlewares: int = 1
    frame_timeout_s: float = defaults.FUZZ_FRAME_TIMEOUT_S
    servers: tuple[str, ...] = ()  # given: fuzz these instead of starting any
    dsn: str | None = None
    pool_size: int = defaults.SERVE.pool.max_size
    seed: int = 0

    def as_json(self) -> dict[str, Any]:
        document = dataclasses.asdict(self)
        document["servers"] = list(self.servers)
        document["database"] = (
            "the servers' own" if self.servers else self.dsn or "fresh embedded PostgreSQL, durable"
        )
        document["dsn"] = None  # may hold a password
        return document


@dataclass(slots=True)
class Server:
    """One middleware under fuzz: its address, process (if started here) and memory."""

    address: str
    pid: int | None
    process: launcher.Middleware | None = None
    rss: list[tuple[float, int]] = field(default_factory=list)  # (monotonic, bytes)

    def sample(self) -> None:
        if self.pid is None:
            return
        with contextlib.suppress(psutil.Error):
            self.rss.append((time.monotonic(), psutil.Process(self.pid).memory_info().rss))

    def alive(self) -> bool | None:
        if self.process is not None:
            return self.process.process.poll() is None
        if self.pid is None:
            return None
        try:
            return psutil.Process(self.pid).status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    def logged_errors(self) -> list[str]:
        if self.process is None:
            return []
        lines = self.process.log_text().splitlines()
        return [line for line in lines if " ERROR " in line or " CRITICAL " in line]


@dataclass(frozen=True, slots=True)
class ServerResult:
    address: str
    pid: int | None
    alive: bool | None  # None: not known (a remote server)
    accepting: bool
    rss_start: int | None
    rss_max: int | None
    rss_end: int | None
    first_half_max: int | None
    second_half_max: int | None
    logged_errors: list[str]

    @property
    def bounded(self) -> bool:
        if self.first_half_max is None or self.second_half_max is None:
            return True
        allowed = self.first_half_max * (1 + GROWTH_SHARE) + GROWTH_SLACK
        return self.second_half_max <= allowed

    def as_json(self) -> dict[str, Any]:
        document = dataclasses.asdict(self)
        document.update(bounded=self.bounded, logged_errors=self.logged_errors[:20],
                        logged_error_count=len(self.logged_errors))  # fmt: skip
        return document


def server_result(server: Server, window: tuple[float, float], accepting: bool) -> ServerResult:
    """Memory figures over the fuzzing window (start, end): the first sample (taken
    before it), the peak, the last (after it), and each half's peak."""
    start, end = window
    middle = (start + end) / 2
    values = [rss for _, rss in server.rss]
    first = [rss for at, rss in server.rss if at <= middle]
    second = [rss for at, rss in server.rss if middle < at <= end]
    return ServerResult(
        server.address, server.pid, server.alive(), accepting,
        values[0] if values else None, max(values, default=None), values[-1] if values else None,
        max(first, default=None), max(second, default=None), server.logged_errors(),
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class FuzzResult:
    settings: Settings
    duration_s: float
    tally: fuzzclients.Tally
    goods: list[fuzzgood.GoodReport]
    servers: list[ServerResult]
    versions: dict[str, str]

    @property
    def problems(self) -> dict[str, int]:
        endings = self.tally.endings
        return {ending: endings[ending] for ending in fuzzclients.PROBLEMS if endings[ending]}

    def failures(self) -> list[str]:
        found = []
        for server in self.servers:
            if server.alive is False:
                found.append(f"middleware {server.address} died")
            if not server.accepting:
                found.append(f"middleware {server.address} stopped accepting clients")
            if not server.bounded:
                found.append(f"middleware {server.address}'s memory kept growing")
        for good in self.goods:
            if good.errors:
                found.append(f"the good client of {good.server} saw {good.errors} errors"
                             f" (last: {good.last_error})")  # fmt: skip
            if good.lost:
                found.append(f"the good client of {good.server} lost {good.lost} messages")
        if self.tally.malformed_replies:
            found.append(f"{self.tally.malformed_replies} malformed replies")
        found += [f"{count} connections: {ending}" for ending, count in self.problems.items()]
        return found

    def verdict(self) -> list[str]:
        lines = [
            f"{self.tally.sent:,} frames in {self.duration_s:.1f} s"
            f" ({self.tally.sent / self.duration_s:,.0f} frames/s)",
        ]
        foreign = sum(good.foreign for good in self.goods)
        if foreign:
            lines.append(f"{foreign} messages from fuzzed SENDs reached a good client's queue;"
                         " counted apart, not as losses")  # fmt: skip
        internal = self.tally.statuses.get(errors.Status.INTERNAL.name, 0)
        if internal:
            lines.append(f"{internal} requests were answered INTERNAL (see the servers' logs)")
        for server in self.servers:
            if server.logged_errors:
                lines.append(f"{server.address} logged {len(server.logged_errors)} errors;"
                             f" the first: {server.logged_errors[0][:300]}")  # fmt: skip
        failures = self.failures()
        lines += [f"FAILED: {failure}" for failure in failures]
        if not failures:
            lines.append("passed: every server alive and accepting, memory bounded,"
                         " no error and no loss for the good clients")  # fmt: skip
        return lines

    def as_json(self) -> dict[str, Any]:
        tally = self.tally
        return {
            "benchmark": NAME,
            "spec": self.settings.as_json(),
            "environment": results.environment(self.versions),
            "duration_s": self.duration_s,
            "frames": {"sent": tally.sent, "per_s": tally.sent / self.duration_s,
                       "by_kind": dict(tally.frames), "guarded": tally.guarded},
            "connections": {"by_role": dict(tally.roles), "endings": dict(tally.endings),
                            "stall_drop_s": stall_summary(tally.stall_drops_s)},
            "replies": {"by_status": dict(tally.statuses), "malformed": tally.malformed_replies,
                        "last_problem": tally.last_problem},
            "well_behaved": [good_json(good) for good in self.goods],
            "servers": [server.as_json() for server in self.servers],
            "verdict": {"passed": not self.failures(), "failures": self.failures(),
                        "text": self.verdict()},
        }  # fmt: skip


def stall_summary(seconds: Sequence[float]) -> dict[str, float] | None:
    if not seconds:
        return None
    return {"min": min(seconds), "median": statistics.median(seconds), "max": max(seconds)}


def good_latency(good: fuzzgood.GoodReport) -> tuple[results.Latency | None, float | None]:
    """Percentiles and the maximum (ms) of a good client's sends and receives."""
    latencies = numpy.array(good.latencies_ns, dtype=numpy.int64)
    top = float(latencies.max()) / results.NS_PER_MS if latencies.size else None
    return results.percentiles(latencies), top


def good_json(good: fuzzgood.GoodReport) -> dict[str, Any]:
    latency, top = good_latency(good)
    document = dataclasses.asdict(good)
    del document["latencies_ns"]
    document.update(operations=good.operations, latency=results.latency_json(latency), max_ms=top)
    return document


# -- running -----------------------------------------------------------------------------


async def run(settings: Settings, phases: progress.Phases) -> FuzzResult:
    prefix = f"fuzz-{secrets.token_hex(3)}"
    with tempfile.TemporaryDirectory(prefix="courier-bench-") as work_dir:
        phases.phase("starting the servers", None, "")
        async with servers_for(settings, Path(work_dir)) as (servers, versions):
            return await fuzz_servers(settings, servers, versions, prefix, phases)


@contextlib.asynccontextmanager
async def servers_for(
    settings: Settings, work_dir: Path
) -> AsyncIterator[tuple[list[Server], dict[str, str]]]:
    """The servers of --servers, or fresh ones on a fresh (or the given) database."""
    if settings.servers:
        yield [Server(address, listening_pid(address)) for address in settings.servers], {}
        return
    connections = settings.middlewares * settings.pool_size
    async with database.for_run(settings.dsn, connections=connections) as (dsn, _):
        versions = {"postgresql": await database.server_version(dsn)}
        started: list[launcher.Middleware] = []
        try:
            for _ in range(settings.middlewares):
                started.append(middleware(settings, dsn, work_dir))
            await asyncio.gather(*(process.ready() for process in started))
            yield [Server(p.address, p.pid, p) for p in started], versions
        finally:
            await asyncio.gather(*(process.stopped() for process in started))


def middleware(settings: Settings, dsn: str, work_dir: Path) -> launcher.Middleware:
    return launcher.Middleware.start(
        work_dir / "logs", dsn=dsn, pool_size=settings.pool_size,
        # Room for every fuzzer, also while the server still finishes the connections
        # they just left, and for the good client.
        max_clients=4 * settings.connections + 16,
        frame_timeout=settings.frame_timeout_s, open_login=True,
    )  # fmt: skip


def listening_pid(address: str) -> int | None:
    """The local process listening on ``address`` (for its memory), if it can be told."""
    ((host, port),) = config.parse_servers(address)
    if host not in LOCAL_HOSTS:
        return None
    try:
        for found in psutil.net_connections(kind="tcp"):
            if found.status == psutil.CONN_LISTEN and found.laddr and found.laddr.port == port:
                return found.pid
    except psutil.Error:
        pass
    return None


async def fuzz_servers(
    settings: Settings,
    servers: list[Server],
    versions: dict[str, str],
    prefix: str,
    phases: progress.Phases,
) -> FuzzResult:
    phases.phase("setting up the clients", None, "")
    goods = [fuzzgood.GoodClient(s.address, f"{prefix}-good{i}") for i, s in enumerate(servers)]
    for good in goods:
        await good.open()
    plan = await fuzz_plan(settings, servers[0].address, goods, prefix)
    for server in servers:
        server.sample()  # the start, before any fuzz
    stop = asyncio.Event()
    background = [asyncio.create_task(good.run(stop)) for good in goods]
    background.append(asyncio.create_task(watch_memory(servers, stop)))
    started = time.monotonic()
    try:
        await fuzz_all(settings, servers, plan, phases)
    finally:
        stop.set()
        await asyncio.gather(*background)
    window = (started, time.monotonic())
    phases.phase("checking the servers", None, "")
    reports = [await good.finish() for good in goods]
    await asyncio.sleep(SETTLE_S)
    for server in servers:
        server.sample()
    checked = [server_result(s, window, await accepts(s.address)) for s in servers]
    return FuzzResult(settings, window[1] - window[0], plan.tally, reports, checked, versions)


async def fuzz_plan(
    settings: Settings, address: str, goods: Sequence[fuzzgood.GoodClient], prefix: str
) -> fuzzclients.Plan:
    """The frames the fuzzers make, aimed at targets of their own, away from the goods."""
    targets = await register_targets(address, prefix)
    rng = random.Random(settings.seed)
    maker = fuzzframes.FrameMaker(
        fuzzframes.valid_bodies(targets), fuzzframes.big_send(targets), targets.queue_ids[0], rng
    )
    guard = fuzzclients.Guard.protecting(
        [good.ids[1] for good in goods], [good.ids[0] for good in goods]
    )
    tally = fuzzclients.Tally(settings.frames)
    return fuzzclients.Plan(maker, guard, tally, prefix, settings.frame_timeout_s)


async def register_targets(address: str, prefix: str) -> fuzzframes.Targets:
    """Clients and queues for the fuzzers to name; each queue holds one message."""
    names = [f"{prefix}-t{index}" for index in range(TARGET_CLIENTS)]
    async with AsyncClient.connect(address) as setup:
        clients = [await setup.register(name) for name in names]
        await setup.login(name=names[0])
        queues = [await setup.create_queue(f"{prefix}-q{n}") for n in range(TARGET_QUEUES)]
        for queue in queues:
            await setup.send(queue.id, "a target of the fuzz")
    return fuzzframes.Targets(
        queue_ids=(*(queue.id for queue in queues), ABSENT_ID),
        client_ids=(*(client.id for client in clients), ABSENT_ID),
        client_names=tuple(names),
        queue_names=(*(queue.name for queue in queues[:2]), f"{prefix}-new"),
    )


async def fuzz_all(
    settings: Settings, servers: list[Server], plan: fuzzclients.Plan, phases: progress.Phases
) -> None:
    """Every slot's connections, with the progress bar following the frames sent."""
    addresses = [config.parse_servers(server.address)[0] for server in servers]
    slots = [
        asyncio.create_task(fuzzclients.fuzz_slot(slot, addresses[slot % len(addresses)], plan))
        for slot in range(settings.connections)
    ]
    phases.phase(f"fuzz: {settings.connections} connections", settings.frames, "frames")
    try:
        pending: set[asyncio.Task[None]] = set(slots)
        while pending:
            _, pending = await asyncio.wait(pending, timeout=0.2)
            phases.advance(plan.tally.sent)
        for slot in slots:
            slot.result()  # a bug in the fuzzers ends the run
    finally:
        for slot in slots:
            slot.cancel()


async def watch_memory(servers: Sequence[Server], stop: asyncio.Event) -> None:
    while True:
        for server in servers:
            server.sample()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), SAMPLE_EVERY_S)
        if stop.is_set():
            return


async def accepts(address: str) -> bool:
    """Whether a new client can connect and get a PING answered."""
    try:
        async with asyncio.timeout(ACCEPT_TIMEOUT_S):
            async with AsyncClient.connect(address, failover_timeout=1.0) as probe:
                await probe.ping()
    except (errors.CourierError, OSError, TimeoutError):
        return False
    return True
