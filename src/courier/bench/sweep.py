"""`courier bench peers`: every selected system over every level, one after another.

For each system the sweep starts what it needs once, then for each number of
clients makes a fresh empty queue, spreads the clients over the client processes
(spawned, one uvloop loop each), lets them all start at one instant, and collects
their latencies. Everything it started is stopped at the end, also on Ctrl-C or
on an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import secrets
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from courier.bench import database, defaults, loop, peers, rabbit, results
from courier.lab import clientpool, loadgen, manifest, processes, workloads

START_DELAY_S = 0.2
"""Between the go and the common start instant, so every process starts together."""
FINISH_GRACE_S = 30.0
POLL_S = 0.1
PACKAGES = ("aio-pika", "numpy")
"""Versions recorded with the results beyond those the lab records."""


@dataclass(frozen=True, slots=True)
class Settings:
    systems: tuple[str, ...] = defaults.SYSTEMS
    clients: tuple[int, ...] = defaults.CLIENT_LEVELS
    duration_s: float = defaults.DURATION_S
    warmup_s: float = defaults.WARMUP_S
    processes: int = defaults.PROCESSES
    middlewares: int = defaults.MIDDLEWARES
    pool_size: int = defaults.SERVE.pool.max_size
    dsn: str | None = None  # None: a fresh durable embedded PostgreSQL
    rabbitmq: str | None = defaults.RABBITMQ_URL  # None: leave RabbitMQ out
    message_size: int = defaults.MESSAGE_SIZE

    @property
    def uses_database(self) -> bool:
        return any(system in (defaults.COURIER, defaults.COURIER_DB) for system in self.systems)

    @property
    def database_connections(self) -> int:
        """What the largest level needs at once: direct clients or middleware pools."""
        direct = max(self.clients) if defaults.COURIER_DB in self.systems else 0
        return max(direct, self.middlewares * self.pool_size)

    def as_json(self) -> dict[str, Any]:
        return {
            "systems": list(self.systems),
            "clients": list(self.clients),
            "duration_s": self.duration_s,
            "warmup_s": self.warmup_s,
            "processes": self.processes,
            "middlewares": self.middlewares,
            "pool_size": self.pool_size,
            "message_size": self.message_size,
            "database": "given DSN" if self.dsn else "fresh embedded PostgreSQL, durable",
            "rabbitmq": rabbit.shown(self.rabbitmq) if self.rabbitmq else None,
        }


def _versions(names: Sequence[str]) -> dict[str, str]:
    found = {}
    for name in names:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            found[name] = importlib.metadata.version(name)
    return found


class Reporter(Protocol):
    """How the sweep tells a person what it is doing (the CLI draws progress bars)."""

    def level_started(self, system: str, clients: int, seconds: float) -> None: ...
    def level_progress(self, elapsed_s: float) -> None: ...
    def level_finished(self, result: results.LevelResult) -> None: ...
    def note(self, text: str) -> None: ...


@dataclass(slots=True)
class Outcome:
    results: list[results.LevelResult] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # system or system@clients
    versions: dict[str, str] = field(default_factory=dict)  # of the peers' servers

    def document(self, settings: Settings) -> dict[str, Any]:
        """Everything as JSON-ready data, with what it ran on."""
        environment = {
            "git_revision": manifest.git_revision(),
            "packages": {**manifest.packages(), **_versions(PACKAGES)},
            "machine": manifest.machine(),
            "servers": self.versions,
        }
        return results.document(settings.as_json(), self.results, self.skipped, environment)


async def run(settings: Settings, reporter: Reporter) -> Outcome:
    outcome = Outcome()
    prefix = f"bench-{secrets.token_hex(3)}"  # names no earlier run on the database used
    with tempfile.TemporaryDirectory(prefix="courier-bench-") as work_dir:
        async with _database(settings) as (dsn, own):
            if dsn:
                outcome.versions["postgresql"] = await database.server_version(dsn)
            for name in settings.systems:
                system = _system(name, settings, dsn, prefix, Path(work_dir))
                await _run_system(system, settings, reporter, outcome, dsn if own else None)
    return outcome


@contextlib.asynccontextmanager
async def _database(settings: Settings) -> AsyncIterator[tuple[str, bool]]:
    if not settings.uses_database:
        yield "", False
        return
    async with database.for_run(settings.dsn, connections=settings.database_connections) as found:
        yield found


def _system(name: str, settings: Settings, dsn: str, prefix: str, work: Path) -> peers.System:
    if name == defaults.COURIER:
        return peers.Courier(
            dsn, prefix, work / "logs", middlewares=settings.middlewares,
            pool_size=settings.pool_size,
        )  # fmt: skip
    if name == defaults.COURIER_DB:
        return peers.CourierDatabase(dsn, f"{prefix}-db")
    if name == defaults.RABBITMQ and settings.rabbitmq:
        return rabbit.RabbitMq(settings.rabbitmq, f"courier-{prefix}")
    raise ValueError(f"unknown system {name!r}")


async def _run_system(
    system: peers.System,
    settings: Settings,
    reporter: Reporter,
    outcome: Outcome,
    own_dsn: str | None,
) -> None:
    try:
        async with system.running(max(settings.clients)):
            if system.version:
                outcome.versions[system.name] = system.version
            for clients in settings.clients:
                try:
                    async with system.level(clients) as target:
                        result = await run_level(system.name, target, clients, settings, reporter)
                    outcome.results.append(result)
                except (peers.Skipped, processes.ProcessFailed) as failed:
                    # A level this box cannot carry (e.g. too many connections) is
                    # reported, and the sweep goes on with the next.
                    outcome.skipped[f"{system.name}@{clients}"] = str(failed)
                    reporter.note(f"{system.name} at {clients} clients: {failed}")
                if own_dsn:
                    await database.settle(own_dsn)
    except peers.Skipped as skipped:
        outcome.skipped[system.name] = str(skipped)
        reporter.note(str(skipped))


async def run_level(
    system: str, target: loop.Target, clients: int, settings: Settings, reporter: Reporter
) -> results.LevelResult:
    """One level: spawn the client processes, start them together, collect them."""
    count = min(settings.processes, clients)
    body = workloads.message_body(settings.message_size)
    shares = [tuple(range(n, clients, count)) for n in range(count)]  # round-robin
    plans = [
        loop.ClientsPlan(f"{system}-clients-{n}", target, share, body, settings.warmup_s)
        for n, share in enumerate(shares)
    ]
    group = clientpool.ProcessGroup(plans, loop.process_main, results.ClientsReport)
    reporter.level_started(system, clients, settings.warmup_s + settings.duration_s)
    group.launch()
    try:
        await group.wait_ready()
        go = loadgen.Go(time.time_ns() + round(START_DELAY_S * 1e9), settings.duration_s)
        group.go(go)
        reports = await _wait_done(group, go, settings, reporter)
    finally:
        await group.stop()
    result = results.combine(system, clients, settings.duration_s, reports)
    reporter.level_finished(result)
    return result


async def _wait_done(
    group: clientpool.ProcessGroup[results.ClientsReport],
    go: loadgen.Go,
    settings: Settings,
    reporter: Reporter,
) -> Sequence[results.ClientsReport]:
    total = settings.warmup_s + settings.duration_s
    done = asyncio.create_task(group.wait_done(total + START_DELAY_S + FINISH_GRACE_S))
    try:
        while not done.done():
            elapsed = max(0.0, (time.time_ns() - go.start_ns) / 1e9)
            reporter.level_progress(min(elapsed, total))
            await asyncio.wait({done}, timeout=POLL_S)
        return done.result()
    finally:
        done.cancel()  # interrupted: stop waiting before the processes are stopped
