"""The experiment runner: `courier lab run SPEC.toml`.

For each planned run (factor levels x replication) the runner resets the database
and installs the real or the mock schema, starts the middleware processes with
recording, prepares queues and client identities through them, measures clock
offsets, prefills the dataset, starts the load-generator processes, lets them run
for the run's duration while it samples the database and itself, then stops
everything it started (by pid) and adds the run to the manifest. Every record
lands in ``<out>/<name>/<run_id>/``.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import psutil

from courier import config, errors
from courier.db import embedded
from courier.lab import (
    clientpool,
    database,
    host,
    loadgen,
    probes,
    process_recording,
    setup,
    spec,
    workloads,
)
from courier.measurements import manifest, record_schema
from courier.server import launcher

START_DELAY_S = 0.5
"""Between the go signal and the common start instant, so every process starts together."""
FINISH_GRACE_S = 30.0
RUNNER_KINDS = (*process_recording.RUNNER_KINDS, record_schema.CLIENT_REQUESTS)
ResultT = TypeVar("ResultT")


class RunnerError(errors.CourierError):
    """The experiment could not run."""


@dataclass(frozen=True, slots=True)
class RunnerOptions:
    out: Path = Path("experiments")
    dsn: str | None = None  # reset and use this database instead of a fresh embedded one
    servers: tuple[str, ...] = ()  # use these running middleware instead of starting any
    overwrite: bool = False


class Reporter(Protocol):
    """How the runner tells a person what it is doing (the CLI shows a progress bar)."""

    def run_started(self, planned: spec.PlannedRun, index: int, total: int) -> None: ...
    def run_progress(self, elapsed_s: float, duration_s: float) -> None: ...
    def run_finished(self, planned: spec.PlannedRun, summary: RunSummary) -> None: ...
    def note(self, text: str) -> None: ...


@dataclass(slots=True)
class RunSummary:
    run_id: str
    requests: int = 0
    errors: int = 0
    last_error: str = ""
    duration_s: float = 0.0
    middleware_exit_codes: dict[str, int | None] = field(default_factory=dict)


class SilentReporter:
    def run_started(self, planned: spec.PlannedRun, index: int, total: int) -> None: ...
    def run_progress(self, elapsed_s: float, duration_s: float) -> None: ...
    def run_finished(self, planned: spec.PlannedRun, summary: RunSummary) -> None: ...
    def note(self, text: str) -> None: ...


async def run_experiment(
    experiment: spec.ExperimentSpec,
    options: RunnerOptions,
    reporter: Reporter | None = None,
) -> Path:
    """Run every planned run in order; returns the experiment directory."""
    reporter = reporter or SilentReporter()
    experiment_dir = experiment_dir_for(options.out / experiment.name, overwrite=options.overwrite)
    written = host.new_manifest(experiment_dir, experiment.name, experiment.raw, experiment.factors)
    written.write()
    planned_runs = experiment.expand()
    needs_db = any(run.config.mock != "middleware" for run in planned_runs)
    async with database_tier(options, durable=experiment.durable, needed=needs_db) as db:
        for index, planned in enumerate(planned_runs):
            reporter.run_started(planned, index, len(planned_runs))
            run = Run(planned, experiment_dir / planned.run_id, db, options, reporter)
            entry, summary = await run.execute()
            written = written.with_run(entry)
            written.write()
            reporter.run_finished(planned, summary)
    return experiment_dir


def experiment_dir_for(path: Path, *, overwrite: bool) -> Path:
    if manifest.path_in(path).exists():
        if not overwrite:
            raise RunnerError(f"{path} already holds an experiment; use --overwrite to replace it")
        shutil.rmtree(path)
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass(frozen=True, slots=True)
class DatabaseTier:
    dsn: str | None
    pid: int | None  # the postmaster, when the runner started it


@contextlib.asynccontextmanager
async def database_tier(
    options: RunnerOptions, *, durable: bool, needed: bool
) -> AsyncIterator[DatabaseTier]:
    """The given DSN, or a fresh embedded PostgreSQL for the whole experiment."""
    if options.dsn or not needed:
        yield DatabaseTier(options.dsn, None)
        return
    async with fresh_database(durable=durable) as server:
        yield DatabaseTier(server.dsn, server.status().pid)


@contextlib.asynccontextmanager
async def fresh_database(*, durable: bool) -> AsyncIterator[embedded.EmbeddedPostgres]:
    """A new embedded PostgreSQL in a temp dir, migrated; stopped and deleted afterwards."""
    data_dir = Path(tempfile.mkdtemp(prefix="courier-lab-pg-"))
    server = embedded.EmbeddedPostgres(data_dir / "data", durable=durable)
    try:
        await asyncio.to_thread(server.start)
        yield server
    finally:
        await asyncio.to_thread(server.stop)
        shutil.rmtree(data_dir, ignore_errors=True)


class Run:
    """One planned run, from a clean database to its manifest entry."""

    def __init__(
        self,
        planned: spec.PlannedRun,
        run_dir: Path,
        db: DatabaseTier,
        options: RunnerOptions,
        reporter: Reporter,
    ) -> None:
        self.planned = planned
        self.config = planned.config
        self.run_dir = run_dir
        self.db = db
        self.options = options
        self.reporter = reporter
        self.token = secrets.token_hex(3)
        self.middleware: list[launcher.Middleware] = []
        self.load: clientpool.ProcessGroup[Any] | None = None
        self.recorded: process_recording.ProcessRecording | None = None

    @property
    def uses_database(self) -> bool:
        return self.config.mock != "middleware" and self.db.dsn is not None

    async def execute(self) -> tuple[manifest.Run, RunSummary]:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        summary = RunSummary(self.planned.run_id)
        try:
            return await self._execute(summary), summary
        finally:
            await self._tear_down(summary)

    async def _execute(self, summary: RunSummary) -> manifest.Run:
        servers = await self._start_tiers()
        plans, offsets = await self._prepare(servers)
        sampler = await self._start_sampler()
        try:
            start_ns, end_ns = await self._generate_load(plans, summary)
        finally:
            if sampler is not None:
                await sampler.stop()
        return self._entry(start_ns, end_ns, offsets)

    async def _start_tiers(self) -> list[str]:
        """A clean database, the runner's recording and the middleware; their addresses."""
        if self.uses_database and not self.options.servers:
            assert self.db.dsn is not None
            await database.prepare(self.db.dsn, mock_schema=self.config.mock == "database")
        self.recorded = self._start_recording()
        return await self._start_middleware()

    def _entry(
        self, start_ns: int, end_ns: int, offsets: dict[str, setup.ClockOffset]
    ) -> manifest.Run:
        return manifest.Run(
            self.planned.run_id, self.planned.levels, self.planned.replication,
            warmup_s=self.config.warmup_s, cooldown_s=self.config.cooldown_s,
            start_ns=start_ns, end_ns=end_ns, clock_offsets=setup.offsets_as_json(offsets),
        )  # fmt: skip

    def _start_recording(self) -> process_recording.ProcessRecording:
        targets = []
        if self.db.pid is not None and self.uses_database:
            with contextlib.suppress(psutil.Error):
                postmaster = psutil.Process(self.db.pid)
                targets.append(probes.SampleTarget("postgres", "database", postmaster, True))
        run_id = self.planned.run_id
        return process_recording.ProcessRecording(
            self.run_dir, run_id, "runner", "runner", RUNNER_KINDS, extra_targets=targets
        ).start()

    async def _start_middleware(self) -> list[str]:
        if self.options.servers:
            return list(self.options.servers)
        mock = self.config.mock == "middleware"
        for _ in range(self.config.middleware):
            self.middleware.append(launcher.Middleware.start(
                self.run_dir / "logs", dsn=None if mock else self.db.dsn, mock=mock,
                record_dir=self.run_dir, run_id=self.planned.run_id,
                pool_size=self.config.pool_size, max_clients=self.config.max_clients,
                open_login=True,  # a private system on loopback: see docs/lab.md
            ))  # fmt: skip
        await asyncio.gather(*(process.ready() for process in self.middleware))
        return [process.address for process in self.middleware]

    async def _prepare(
        self, servers: list[str]
    ) -> tuple[list[loadgen.ProcessPlan], dict[str, setup.ClockOffset]]:
        assert self.recorded is not None
        slots = client_slots(self.config, servers, f"lab-{self.token}-{self.planned.run_id}")
        pool_count = self.config.queues
        if self.config.dataset == "full":
            pool_count = max(pool_count, database.FULL_DATASET_QUEUES)
        async with setup.Setup(servers, self.recorded, f"lab-{self.token}-setup") as prepared:
            queues = await prepared.queues(pool_count)
            ids = await prepared.register([slot.name for slot in slots])
            offsets = await prepared.clock_offsets()
        slots = [_with_id(slot, client_id) for slot, client_id in zip(slots, ids, strict=True)]
        if self.config.dataset == "full" and self.uses_database:
            assert self.db.dsn is not None
            await database.prefill_full(
                self.db.dsn, queues.pool, ids, self.config.message_size,
                sender_prefix=f"lab-{self.token}-{self.planned.run_id}-sender",
            )  # fmt: skip
        pooled = workloads.QueueIds(queues.pool[: self.config.queues], queues.pairs, queues.jobs)
        return process_plans(self.config, self.planned.run_id, self.run_dir, slots, pooled), offsets

    async def _start_sampler(self) -> database.DatabaseSampler | None:
        if not self.uses_database:
            return None
        assert self.db.dsn is not None and self.recorded is not None
        return await database.DatabaseSampler(
            self.db.dsn, self.recorded.append, self.planned.run_id
        ).start()

    async def _generate_load(
        self, plans: list[loadgen.ProcessPlan], summary: RunSummary
    ) -> tuple[int, int]:
        load = clientpool.LoadProcesses(plans)
        self.load = load
        load.launch()
        await load.wait_ready()
        start_ns, end_ns, results = await self._drive(load)
        summarise(summary, results, (end_ns - start_ns) / 1e9)
        return start_ns, end_ns

    async def _drive(
        self, load: clientpool.ProcessGroup[ResultT]
    ) -> tuple[int, int, list[ResultT]]:
        """Give the ready processes a common start, show the seconds passing and wait
        for their results; the run's start and end instants."""
        start_ns = time.time_ns() + int(START_DELAY_S * 1e9)
        duration = self.config.duration_s
        load.go(loadgen.Go(start_ns, duration))
        done = asyncio.create_task(load.wait_done(duration + START_DELAY_S + FINISH_GRACE_S))
        try:
            while not done.done():
                elapsed = max(0.0, (time.time_ns() - start_ns) / 1e9)
                self.reporter.run_progress(min(elapsed, duration), duration)
                await asyncio.wait({done}, timeout=0.25)
            results = done.result()
        finally:
            done.cancel()  # interrupted: stop waiting before the processes are stopped
        return start_ns, min(time.time_ns(), start_ns + int(duration * 1e9)), results

    async def _tear_down(self, summary: RunSummary) -> None:
        if self.load is not None:
            await self.load.stop()
        codes = await asyncio.gather(*(process.stopped() for process in self.middleware))
        for process, code in zip(self.middleware, codes, strict=True):
            summary.middleware_exit_codes[process.address] = code
        if self.recorded is not None:
            self.recorded.close()


def client_slots(
    config: spec.RunConfig, servers: Sequence[str], prefix: str
) -> list[loadgen.ClientSlot]:
    """Every client of the mix, spread round-robin over the middleware (failover in order)."""
    addresses = [config_address(server) for server in servers]
    behaviours = [name for name, count in config.client_counts().items() for _ in range(count)]
    slots = []
    for index, behaviour in enumerate(behaviours):
        ordered = failover_order(addresses, index)
        slots.append(loadgen.ClientSlot(f"{prefix}-{index:04d}", behaviour, ordered))
    return slots


def failover_order(addresses: Sequence[tuple[str, int]], index: int) -> tuple[tuple[str, int], ...]:
    """The middleware for the ``index``-th client: round-robin, then the others in order."""
    first = index % len(addresses)
    return (*addresses[first:], *addresses[:first])


def config_address(server: str) -> tuple[str, int]:
    return config.parse_servers(server)[0]


def _with_id(slot: loadgen.ClientSlot, client_id: int) -> loadgen.ClientSlot:
    return loadgen.ClientSlot(slot.name, slot.behaviour, slot.servers, client_id)


def process_plans(
    config: spec.RunConfig,
    run_id: str,
    run_dir: Path,
    slots: Sequence[loadgen.ClientSlot],
    queues: workloads.QueueIds,
) -> list[loadgen.ProcessPlan]:
    """Deal the clients round-robin over the load-generator processes."""
    count = max(1, min(config.client_processes, len(slots)))
    peers: dict[str, list[int]] = {}
    for slot in slots:
        peers.setdefault(slot.behaviour, []).append(slot.client_id)
    return [
        loadgen.ProcessPlan(
            process=f"clients-{index}",
            run_dir=run_dir,
            run_id=run_id,
            slots=tuple(slots[index::count]),
            queues=queues,
            message_size=config.message_size,
            priorities=config.priorities,
            targets_per_message=config.targets_per_message,
            think_time_s=config.think_time_ms / 1000,
            rate=config.rate if config.arrival == "open" else 0.0,
            request_limit=config.requests_per_client,
            seed=config.seed,
            peers={name: tuple(ids) for name, ids in peers.items()},
        )
        for index in range(count)
    ]


class Totals(Protocol):
    """What a load process reports at its end."""

    requests: int
    errors: int
    last_error: str


def summarise(summary: RunSummary, results: Sequence[Totals], seconds: float) -> None:
    summary.duration_s = seconds
    for result in results:
        summary.requests += result.requests
        summary.errors += result.errors
        summary.last_error = result.last_error or summary.last_error
