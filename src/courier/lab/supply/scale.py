"""Benchmark runs judged as they finish: one BASE (``courier lab bench``) or the
search for the largest valid one (``courier lab scale``).

The judge is passed in (the CLI gives the Spark analysis, ``courier.analysis.
benchmark``), so the lab does not depend on the analysis: ``judge(experiment_dir,
run_id, base)`` returns the run's ``search.Point``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from courier.lab import clientpool, runner
from courier.lab.supply import bench, search, topology

Judge = Callable[[Path, str, int], search.Point]


async def run_search(
    spec: topology.BenchSpec,
    topology_name: str,
    options: runner.RunnerOptions,
    judge: Judge,
    reporter: runner.Reporter | None = None,
) -> tuple[search.Result, Path]:
    """Search BASE for the topology; the result and the experiment directory."""
    async with bench.BenchExperiment(spec, topology_name, options, reporter) as experiment:

        async def measure(base: int) -> search.Point:
            return await _measured(experiment, judge, base)

        result = await search.search(measure, spec.search)
    return result, experiment.directory


async def run_once(
    spec: topology.BenchSpec,
    topology_name: str,
    base: int,
    options: runner.RunnerOptions,
    judge: Judge,
    reporter: runner.Reporter | None = None,
) -> tuple[search.Point, Path]:
    """One run at ``base``, judged."""
    async with bench.BenchExperiment(
        spec, topology_name, options, reporter, planned_runs=1
    ) as experiment:
        point = await _measured(experiment, judge, base)
    return point, experiment.directory


async def _measured(experiment: bench.BenchExperiment, judge: Judge, base: int) -> search.Point:
    """The run at ``base``, judged; a run whose load processes failed is invalid."""
    run_id = experiment.next_run_id()
    try:
        run = await experiment.run(base)
    except clientpool.ProcessFailed as exc:
        experiment.reporter.note(f"{run_id} BASE {base}: invalid, the run failed: {exc}")
        return search.Point(base, run_id, False, [f"the run failed: {exc}"])
    experiment.reporter.note(f"{run.run_id}: judging BASE {base}")
    return await asyncio.to_thread(judge, experiment.directory, run.run_id, base)
