"""`courier bench peers`: every selected system at every level, one after another.

Each system starts what it needs. For each number of clients it makes a fresh
empty queue, spreads the clients over the client processes (spawned, one uvloop
loop each), lets them all start at one instant, and collects their latencies. Only
one system is measured at a time.

By default (``--order levels``) the systems take turns at each level: all of them
are started first, and a system that is not being measured sits idle. The runs a
ratio compares are then seconds apart, not minutes, so a drift of the machine's
pace between them stays small. With ``--order systems`` each system runs over
every level and is stopped before the next one starts.

With ``--rounds`` the whole sweep runs again, the systems and the levels in the
reverse order every other round, so that a slow drift favours no system and no
level. Everything it started is stopped at the end, also on Ctrl-C or on an error.
"""

from __future__ import annotations

import contextlib
import secrets
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from courier.bench import database, defaults, launch, loop, peers, rabbit, results
from courier.lab import clientpool, host
from courier.server import launcher

T = TypeVar("T")


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
    batch: int = 1  # messages per send and per pop (1: single requests)
    open_login: bool = False  # Courier's clients log in by name alone, without secrets
    tls: bool = False  # Courier's clients and middleware speak TLS
    modes: tuple[str, ...] = (defaults.PERSISTENT,)  # Courier's systems run once per mode
    rounds: int = 1  # times the whole sweep runs, the order reversed every other time
    order: str = defaults.BY_LEVEL  # at each level every system, or each system in turn

    @property
    def uses_database(self) -> bool:
        return any(system in (defaults.COURIER, defaults.COURIER_DB) for system in self.systems)

    @property
    def database_connections(self) -> int:
        """What the largest level needs at once: the direct clients, and the pools of
        every Courier system's middleware (those stay up while the others run a level
        when the sweep goes level by level)."""
        direct = max(self.clients) if defaults.COURIER_DB in self.systems else 0
        pools = self.middlewares * (self.pool_size + 1)  # and each one's LISTEN connection
        if self.order == defaults.BY_SYSTEM:
            return max(direct, pools)
        courier_runs = len(self.modes) if defaults.COURIER in self.systems else 0
        return direct + courier_runs * pools

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
            "batch": self.batch,
            "login": "open" if self.open_login else "secret",
            "tls": self.tls,
            "modes": list(self.modes),
            "rounds": self.rounds,
            "order": self.order,
            "database": "given DSN" if self.dsn else "fresh embedded PostgreSQL, durable",
            "rabbitmq": rabbit.shown(self.rabbitmq) if self.rabbitmq else None,
        }


class Reporter(Protocol):
    """How the sweep tells a person what it is doing (the CLI draws progress bars)."""

    def level_started(self, system: str, clients: int, seconds: float) -> None: ...
    def level_progress(self, elapsed_s: float) -> None: ...
    def level_finished(self, result: results.LevelResult) -> None: ...
    def note(self, text: str) -> None: ...


@dataclass(slots=True)
class Outcome:
    pace: results.Pace | None = None  # set at the end of the run
    results: list[results.LevelResult] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # system or system@clients
    versions: dict[str, str] = field(default_factory=dict)  # of the peers' servers

    def document(self, settings: Settings) -> dict[str, Any]:
        """Everything as JSON-ready data, with what it ran on."""
        environment = results.environment(self.versions, self.pace)
        return results.document(settings.as_json(), self.results, self.skipped, environment)


async def run(settings: Settings, reporter: Reporter) -> Outcome:
    pace_at_start = host.pace_ms()
    outcome = Outcome()
    prefix = f"bench-{secrets.token_hex(3)}"  # names no earlier run on the database used
    with tempfile.TemporaryDirectory(prefix="courier-bench-") as work_dir:
        async with _database(settings) as (dsn, own):
            if dsn:
                outcome.versions["postgresql"] = await database.server_version(dsn)
            for round_number in range(1, settings.rounds + 1):
                systems = [
                    _system_in_mode(name, mode, settings, dsn,
                                    _names(prefix, round_number, mode), Path(work_dir))
                    for name, mode in in_turn(_runs(settings), round_number)
                ]  # fmt: skip
                this_round = _Round(settings, reporter, outcome, dsn if own else None, round_number)
                if settings.order == defaults.BY_SYSTEM:
                    await this_round.by_system(systems)
                else:
                    await this_round.by_level(systems)
    outcome.pace = results.Pace.since(pace_at_start)
    return outcome


def in_turn(items: list[T], round_number: int) -> list[T]:
    """The order of a round, of its systems and of each system's levels: as given in
    odd rounds, reversed in even ones."""
    return items if round_number % 2 else items[::-1]


def _names(prefix: str, round_number: int, mode: str) -> str:
    """The prefix of a run's client and queue names: each round and each mode
    registers clients and queues of its own, so their names stand apart."""
    named = prefix if round_number == 1 else f"{prefix}-r{round_number}"
    return named if mode == defaults.PERSISTENT else f"{named}-np"


def _skip_key(skipped: str, round_number: int, settings: Settings) -> str:
    """What ``Outcome.skipped`` files a skip under: with rounds, per round."""
    return f"{skipped}#{round_number}" if settings.rounds > 1 else skipped


@contextlib.asynccontextmanager
async def _database(settings: Settings) -> AsyncIterator[tuple[str, bool]]:
    if not settings.uses_database:
        yield "", False
        return
    async with database.for_run(settings.dsn, connections=settings.database_connections) as found:
        yield found


def _runs(settings: Settings) -> list[tuple[str, str]]:
    """(system, mode) in order: each of Courier's systems once per mode, the others once."""
    courier = (defaults.COURIER, defaults.COURIER_DB)
    return [
        (name, mode)
        for name in settings.systems
        for mode in (settings.modes if name in courier else settings.modes[:1])
    ]


def _non_persistent(system: peers.System) -> None:
    """A Courier system whose every message skips the write-ahead log, so named."""
    if isinstance(system, peers.Courier | peers.CourierDatabase):
        system.persistent = False
        system.name += f"/{defaults.NON_PERSISTENT}"


def _system_in_mode(
    name: str, mode: str, settings: Settings, dsn: str, prefix: str, work: Path
) -> peers.System:
    system = _system(name, settings, dsn, prefix, work)
    if mode != defaults.PERSISTENT:
        _non_persistent(system)
    return system


def _system(name: str, settings: Settings, dsn: str, prefix: str, work: Path) -> peers.System:
    if name == defaults.COURIER:
        return peers.Courier(
            dsn, prefix, work / "logs", middlewares=settings.middlewares,
            pool_size=settings.pool_size, batch=settings.batch,
            open_login=settings.open_login, tls=settings.tls,
        )  # fmt: skip
    if name == defaults.COURIER_DB:
        return peers.CourierDatabase(dsn, f"{prefix}-db", settings.batch)
    if name == defaults.RABBITMQ and settings.rabbitmq:
        return rabbit.RabbitMq(settings.rabbitmq, f"courier-{prefix}", settings.batch)
    raise ValueError(f"unknown system {name!r}")


@dataclass(slots=True)
class _Round:
    """One round of the sweep: its systems' levels, in one of the two orders."""

    settings: Settings
    reporter: Reporter
    outcome: Outcome
    own_dsn: str | None  # the run's own database, settled between levels
    number: int

    async def by_system(self, systems: list[peers.System]) -> None:
        """Each system over every level, stopped before the next one starts."""
        for system in systems:
            try:
                async with system.running(max(self.settings.clients)):
                    self._started(system)
                    for clients in self._levels():
                        await self._measure(system, clients)
            except peers.Skipped as skipped:
                self._skip(system.name, str(skipped))

    async def by_level(self, systems: list[peers.System]) -> None:
        """Every system started first; then at each level each system in turn, the
        others idle meanwhile."""
        async with contextlib.AsyncExitStack() as stack:
            running: list[peers.System] = []
            for system in systems:
                try:
                    await stack.enter_async_context(system.running(max(self.settings.clients)))
                except peers.Skipped as skipped:
                    self._skip(system.name, str(skipped))
                    continue
                self._started(system)
                running.append(system)
            for clients in self._levels():
                for system in running:
                    await self._measure(system, clients)

    def _levels(self) -> list[int]:
        return in_turn(list(self.settings.clients), self.number)

    def _started(self, system: peers.System) -> None:
        if system.version:
            self.outcome.versions[system.name] = system.version

    def _skip(self, what: str, reason: str) -> None:
        self.outcome.skipped[_skip_key(what, self.number, self.settings)] = reason
        self.reporter.note(reason)

    async def _measure(self, system: peers.System, clients: int) -> None:
        """One system at one level. A level this box cannot carry (e.g. too many
        connections) is reported, and the sweep goes on with the next."""
        try:
            async with system.level(clients) as target:
                result = await run_level(system.name, target, clients, self.settings,
                                         self.reporter, self.number)  # fmt: skip
            self.outcome.results.append(result)
        except (peers.Skipped, clientpool.ProcessFailed, launcher.LaunchFailed) as failed:
            self.outcome.skipped[
                _skip_key(f"{system.name}@{clients}", self.number, self.settings)
            ] = str(failed)
            self.reporter.note(f"{system.name} at {clients} clients: {failed}")
        if self.own_dsn:
            await database.settle(self.own_dsn)


async def run_level(
    system: str,
    target: loop.Target,
    clients: int,
    settings: Settings,
    reporter: Reporter,
    round_number: int = 1,
) -> results.LevelResult:
    """One level: spawn the client processes, start them together, collect them."""
    shape = launch.Loop(
        settings.processes, settings.message_size, settings.warmup_s, settings.duration_s
    )
    reporter.level_started(system, clients, shape.seconds)

    async def watch(elapsed_s: float) -> None:
        reporter.level_progress(min(elapsed_s, shape.seconds))

    reports = await launch.closed_loop(system, target, clients, shape, watch)
    result = results.combine(
        system, clients, settings.duration_s, reports, settings.batch, round_number
    )
    reporter.level_finished(result)
    return result
