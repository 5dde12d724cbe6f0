"""What measuring costs: the same closed-loop workload with and without recording.

Sixteen `standard` clients in one load-generator process drive one middleware for
a few seconds, once with every tier recording (client records, middleware records,
resources, GC pauses) and once with none. The two runs of a pair follow each other,
in alternating order (bare first, then recorded first, ...), so that drift in the
host's load falls on both sides alike; the cost is the median over the pairs of
1 - recorded / bare throughput. Throughput is standard cycles per second (12
requests each); the CPU time the load generator and the middleware spent per
request is printed too, as it is steadier than throughput on a shared host.

Recording must cost at most 5% of throughput on the real database tier, the
product's configuration. The mock middleware, where requests are cheapest and
recording's share is largest, is printed for information. Run it on a quiet host
(other load makes single pairs swing by several percent): make bench, or
    .venv/bin/pytest tests/benchmarks/test_recording_overhead.py -s
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING

import psutil
import pytest

from courier.lab import clientpool, loadgen, processes, runner, setup, spec

if TYPE_CHECKING:
    from conftest import TestDatabases  # the shared fixture's type (tests/conftest.py)

CLIENTS = 16
MAX_COST = 0.05


@dataclasses.dataclass(frozen=True)
class Plan:
    pairs: int
    seconds: float  # of load in each run


PLANS = {"database": Plan(pairs=6, seconds=5.0), "mock-middleware": Plan(pairs=3, seconds=3.0)}
REQUESTS_PER_CYCLE = 12


@dataclasses.dataclass(frozen=True)
class Measured:
    cycles_per_s: float
    client_cpu_us: float  # per request
    middleware_cpu_us: float  # per request


async def measure(
    dsn: str, work_dir: Path, *, record: bool, mock: bool, seconds: float
) -> Measured:
    record_dir = work_dir / ("recorded" if record else "bare")
    options = processes.MiddlewareOptions(
        dsn=dsn, port=processes.free_port(), record_dir=record_dir if record else None,
        run_id="bench", pool_size=8, mock=mock,
    )  # fmt: skip
    server = processes.MiddlewareProcess(options, work_dir / "logs")
    server.launch()
    load: clientpool.LoadProcesses | None = None
    try:
        await server.wait_ready()
        load = clientpool.LoadProcesses([await plan(options.address, record_dir, record)])
        load.launch()
        await load.wait_ready()
        assert server.pid is not None
        middleware = psutil.Process(server.pid)
        before = sum(middleware.cpu_times()[:2])
        load.go(loadgen.Go(time.time_ns(), seconds))
        (result,) = await load.wait_done(seconds + 30)
        middleware_cpu = sum(middleware.cpu_times()[:2]) - before
    finally:
        if load is not None:
            await load.stop()
        await server.stop()
    # Failed iterations (recorded with their status) would only make a side look faster.
    assert result.errors <= result.iterations // 100, result.last_error
    requests = result.iterations * REQUESTS_PER_CYCLE
    return Measured(
        result.iterations / seconds, 1e6 * result.cpu_s / requests, 1e6 * middleware_cpu / requests
    )


async def plan(address: str, record_dir: Path, record: bool) -> loadgen.ProcessPlan:
    config = spec.build_config({"mix": {"standard": CLIENTS}, "client_processes": 1})
    prefix = f"bench-{time.monotonic_ns()}"
    async with setup.Setup([address], None, f"{prefix}-setup") as prepared:
        queues = await prepared.queues(config.queues)
        slots = runner.client_slots(config, [address], prefix)
        ids = await prepared.register([slot.name for slot in slots])
    slots = [
        loadgen.ClientSlot(slot.name, slot.behaviour, slot.servers, client_id)
        for slot, client_id in zip(slots, ids, strict=True)
    ]
    (made,) = runner.process_plans(config, "bench", record_dir, slots, queues)
    return dataclasses.replace(made, record=record)


async def measure_pairs(
    databases: TestDatabases, template: str, work_dir: Path, plan: Plan, *, mock: bool
) -> tuple[list[Measured], list[Measured]]:
    """(bare, recorded) runs, one of each per pair, in alternating order. Each run gets
    a fresh copy of the migrated database: the standard cycle leaves dead rows behind,
    and later runs in the same database would be slower."""
    bare: list[Measured] = []
    recorded: list[Measured] = []
    for pair in range(plan.pairs):
        for record in (False, True) if pair % 2 == 0 else (True, False):
            dsn = databases.create(template=template)
            try:
                work = work_dir / f"p{pair}"
                run = await measure(dsn, work, record=record, mock=mock, seconds=plan.seconds)
            finally:
                databases.drop(dsn)
            (recorded if record else bare).append(run)
    return bare, recorded


def describe(label: str, runs: list[Measured]) -> str:
    cycles = statistics.median(run.cycles_per_s for run in runs)
    client = statistics.median(run.client_cpu_us for run in runs)
    middleware = statistics.median(run.middleware_cpu_us for run in runs)
    trials = [round(run.cycles_per_s) for run in runs]
    return (
        f"  {label:<18} {cycles:7.1f} cycles/s ({cycles * REQUESTS_PER_CYCLE:6.0f} requests/s)"
        f"  CPU per request: client {client:5.1f} us, middleware {middleware:5.1f} us"
        f"  trials {trials}"
    )


@pytest.mark.benchmark
@pytest.mark.parametrize("tier", list(PLANS))
async def test_recording_costs_at_most_five_percent(
    databases: TestDatabases, template_database: str, tmp_path: Path, tier: str
) -> None:
    plan = PLANS[tier]
    mock = tier == "mock-middleware"
    bare, recorded = await measure_pairs(databases, template_database, tmp_path, plan, mock=mock)
    costs = [1 - r.cycles_per_s / b.cycles_per_s for b, r in zip(bare, recorded, strict=True)]
    cost = statistics.median(costs)
    print(
        f"\n{tier}: {CLIENTS} standard clients, {plan.pairs} pairs of {plan.seconds:g} s runs\n"
        + describe("without recording", bare) + "\n"
        + describe("with recording", recorded) + "\n"
        + f"  recording costs {100 * cost:.1f}% of throughput (median of pairs;"
        f" pairs {', '.join(f'{100 * c:.1f}%' for c in costs)})"
        f" (host load average {psutil.getloadavg()[0]:.1f} on {psutil.cpu_count()} CPUs)"
    )  # fmt: skip
    if tier == "database":  # the product's configuration; the mock tier is information
        assert cost <= MAX_COST
