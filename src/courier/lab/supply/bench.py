"""Benchmark runs: one experiment directory, one run per BASE measured.

    async with BenchExperiment(spec, "horizontal", options, reporter) as experiment:
        run = await experiment.run(base=2)      # records in <out>/<name>-horizontal/r000

Each run is a lab run (``runner.Run``: a clean database, middleware started with
recording, the database sampled every second) whose load is the benchmark's
agents: the runner creates every queue and topic, registers one client per
location, starts the agent processes, and once they have subscribed writes the
run's ``destinations.json``. The manifest lists every run with its ``base`` level.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from courier.lab import clientpool, host, runner, setup
from courier.lab import spec as lab_spec
from courier.lab.supply import agents, destinations, process, topology
from courier.measurements import destinations as destinations_file
from courier.measurements import manifest


@dataclass(frozen=True)
class BenchRun:
    """A finished run: where its records are, and what the load processes did."""

    run_id: str
    base: int
    run_dir: Path
    plan: topology.Plan
    summary: runner.RunSummary


class BenchExperiment:
    """The database, the experiment directory and its manifest, for a series of runs."""

    def __init__(
        self,
        bench: topology.BenchSpec,
        topology_name: str,
        options: runner.RunnerOptions,
        reporter: runner.Reporter | None = None,
        *,
        planned_runs: int | None = None,
    ) -> None:
        """``planned_runs``: how many runs the progress shows (default: the search's)."""
        self.bench = bench
        self.planned_runs = planned_runs or bench.search.max_runs
        self.topology = topology_name
        self.options = options
        self.reporter = reporter or runner.SilentReporter()
        self.name = f"{bench.name}-{topology_name}"
        self.directory = options.out / self.name
        self.runs: list[BenchRun] = []
        self._started = 0  # runs begun, failed ones included: each gets its own id
        self._stack = contextlib.AsyncExitStack()
        self._db: runner.DatabaseTier | None = None
        self._manifest: manifest.Manifest | None = None

    async def __aenter__(self) -> BenchExperiment:
        runner.experiment_dir_for(self.directory, overwrite=self.options.overwrite)
        raw = {**self.bench.raw, "topology": self.topology}
        self._manifest = host.new_manifest(self.directory, self.name, raw, {"base": []})
        self._manifest.write()
        self._db = await self._stack.enter_async_context(
            runner.database_tier(self.options, durable=self.bench.durable, needed=True)
        )
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._stack.aclose()

    def next_run_id(self) -> str:
        return f"r{self._started:03d}"

    async def run(self, base: int) -> BenchRun:
        """Run the benchmark at ``base`` and add the run to the manifest."""
        assert self._db is not None and self._manifest is not None
        plan = self.bench.plan(base, self.topology)
        run_id = self.next_run_id()
        self._started += 1
        planned = lab_spec.PlannedRun(run_id, {"base": base}, 0, self.bench.system)
        self.reporter.run_started(planned, self._started - 1, self.planned_runs)
        agents_run = AgentsRun(planned, self.directory / run_id, self._db, self.options,
                               self.reporter, self.bench, plan)  # fmt: skip
        entry, summary = await agents_run.execute()
        levels = [*self._manifest.factors["base"], base]
        self._manifest = dataclasses.replace(
            self._manifest.with_run(entry), factors={"base": levels}
        )
        self._manifest.write()
        self.reporter.run_finished(planned, summary)
        finished = BenchRun(run_id, base, self.directory / run_id, plan, summary)
        self.runs.append(finished)
        return finished


class AgentsRun(runner.Run):
    """A lab run whose load is the benchmark's agents."""

    def __init__(
        self,
        planned: lab_spec.PlannedRun,
        run_dir: Path,
        db: runner.DatabaseTier,
        options: runner.RunnerOptions,
        reporter: runner.Reporter,
        bench: topology.BenchSpec,
        plan: topology.Plan,
    ) -> None:
        super().__init__(planned, run_dir, db, options, reporter)
        self.bench = bench
        self.plan = plan

    async def _execute(self, summary: runner.RunSummary) -> manifest.Run:
        servers = await self._start_tiers()
        async with setup.Setup(servers, self.recorded, f"lab-{self.token}-setup") as prepared:
            await _create_destinations(prepared, self.plan)
            names = self.plan.all_names()
            ids = await prepared.register([self._client_name(name) for name in names])
            offsets = await prepared.clock_offsets()
            plans = self._agent_plans(servers, dict(zip(names, ids, strict=True)))
            sampler = await self._start_sampler()
            try:
                start_ns, end_ns = await self._run_agents(plans, prepared, summary)
            finally:
                if sampler is not None:
                    await sampler.stop()
        return self._entry(start_ns, end_ns, offsets)

    def _client_name(self, location: str) -> str:
        return f"lab-{self.token}-{self.planned.run_id}-{location}"

    async def _run_agents(
        self, plans: list[process.AgentPlan], prepared: setup.Setup, summary: runner.RunSummary
    ) -> tuple[int, int]:
        load = clientpool.ProcessGroup(plans, process.process_main, process.AgentResult)
        self.load = load
        load.launch()
        await load.wait_ready()  # every location has logged in and subscribed
        found = destinations.destination_map(await prepared.client.list_queues())
        destinations_file.write(self.run_dir, found)
        start_ns, end_ns, results = await self._drive(load)
        runner.summarise(summary, results, (end_ns - start_ns) / 1e9)
        cut_short = sum(result.cut_short for result in results)
        if cut_short:
            self.reporter.note(
                f"{self.planned.run_id}: {cut_short} locations still waiting for replies"
                f" {process.STOP_GRACE_S:g} s after the end were stopped"
            )
        return start_ns, end_ns

    def _agent_plans(self, servers: list[str], ids: dict[str, int]) -> list[process.AgentPlan]:
        """Deal the locations round-robin over the processes (a location stays whole)."""
        addresses = [runner.config_address(server) for server in servers]
        locations = []
        for index, name in enumerate(self.plan.all_names()):
            ordered = runner.failover_order(addresses, index)
            locations.append(process.Location(name, name.split("-")[0], ids[name], ordered))
        count = max(1, min(self.config.client_processes, len(locations)))
        world = agents.World(self.plan, self.bench.sizes, self.bench.handlers)
        return [
            process.AgentPlan(
                f"agents-{index}",
                self.run_dir,
                self.planned.run_id,
                tuple(locations[index::count]),
                world,
                self.bench.seed,
            )
            for index in range(count)
        ]


async def _create_destinations(prepared: setup.Setup, plan: topology.Plan) -> None:
    for name in destinations.queues(plan):
        await prepared.queue(name)
    for name in destinations.topics(plan):
        await prepared.client.create_topic(name)
