"""What measuring costs: the same closed-loop workload with and without recording.

Two systems run side by side on copies of one database, each one middleware with
sixteen `standard` clients in one load-generator process: the bare one records
nothing, the recorded one records everything (client records, middleware records,
resources, GC pauses). They take turns: in each round both drive the load for a
short window, one after the other, in alternating order, while the other rests.
Drift in the host's load (other processes, PostgreSQL's background work) then falls
on both sides alike; separate runs a few seconds apart swung by ±20% on this 2-core
host. What differs between two sets of processes for their whole life (where the
kernel placed them, which was started first) is evened out by several sessions,
each with fresh processes and databases, started in alternating order.

The cost is the median over all rounds of 1 - recorded / bare throughput, where a
window's throughput is its standard cycles (12 requests each) over the time from
its start to the end of its last cycle. The CPU time the load generator and the
middleware spent per request is printed too.

Recording must cost at most 5% of throughput on the real database tier, the
product's configuration. The mock middleware, where requests are cheapest and
recording's share is largest, is printed for information. Run with
    make bench, or .venv/bin/pytest tests/benchmarks/test_recording_overhead.py -s
"""

from __future__ import annotations

import contextlib
import dataclasses
import statistics
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import psutil
import pytest

from courier.lab import clientpool, loadgen
from courier.server import launcher
from helpers.load import load_plan

if TYPE_CHECKING:
    from conftest import TestDatabases  # the shared fixture's type (tests/conftest.py)

CLIENTS = 16
MAX_COST = 0.05
REQUESTS_PER_CYCLE = 12
SECOND_NS = 1_000_000_000


@dataclasses.dataclass(frozen=True)
class Plan:
    sessions: int
    rounds: int  # per session
    window_s: float  # of load for each side in a round
    gap_s: float = 0.25  # between windows, for the cycles in progress to finish


PLANS = {
    "database": Plan(sessions=4, rounds=16, window_s=0.5),
    "mock-middleware": Plan(sessions=2, rounds=16, window_s=0.4),
}


@dataclasses.dataclass
class Side:
    """One of the two systems of a session: its middleware and its load process."""

    server: launcher.Middleware
    load: clientpool.LoadProcesses | None = None
    windows: list[loadgen.Window] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Measured:
    """One side over all sessions."""

    cycles_per_s: list[float] = dataclasses.field(default_factory=list)  # per window
    requests: int = 0
    client_cpu_s: float = 0.0
    middleware_cpu_s: float = 0.0

    def add(self, result: loadgen.ProcessResult, middleware_cpu_s: float) -> None:
        windows = zip(result.window_iterations, result.window_busy_s, strict=True)
        self.cycles_per_s += [cycles / busy for cycles, busy in windows]
        self.requests += result.iterations * REQUESTS_PER_CYCLE
        self.client_cpu_s += result.cpu_s
        self.middleware_cpu_s += middleware_cpu_s


@contextlib.asynccontextmanager
async def side(dsn: str, work_dir: Path, *, record: bool, mock: bool) -> AsyncIterator[Side]:
    """A middleware and its logged-in clients, ready for a go; stopped on leaving."""
    record_dir = work_dir / ("recorded" if record else "bare")
    server = launcher.Middleware.start(
        work_dir / "logs", dsn=None if mock else dsn, mock=mock,
        record_dir=record_dir if record else None, run_id="bench", pool_size=8,
        open_login=True,  # the lab's load processes log in by name
    )  # fmt: skip
    running = Side(server)
    try:
        await running.server.ready()
        made = await load_plan(server.address, record_dir, {"standard": CLIENTS}, record=record)
        running.load = clientpool.LoadProcesses([made])
        running.load.launch()
        await running.load.wait_ready()
        yield running
    finally:
        if running.load is not None:
            await running.load.stop()
        await running.server.stopped()


def schedule(bare: Side, recorded: Side, plan: Plan) -> None:
    """Give each side its windows: round by round, in alternating order."""
    at = time.time_ns() + SECOND_NS
    for round_number in range(plan.rounds):
        order = (bare, recorded) if round_number % 2 == 0 else (recorded, bare)
        for each in order:
            each.windows.append(loadgen.Window(at, plan.window_s))
            at += int((plan.window_s + plan.gap_s) * SECOND_NS)


async def drive(sides: dict[bool, Side], plan: Plan, measured: dict[bool, Measured]) -> None:
    """One session's rounds; adds what each side did to ``measured`` (by recording)."""
    schedule(sides[False], sides[True], plan)
    middlewares = {record: psutil.Process(each.server.pid) for record, each in sides.items()}
    cpu_before = {record: sum(p.cpu_times()[:2]) for record, p in middlewares.items()}
    for each in sides.values():
        assert each.load is not None
        first, *later = each.windows
        each.load.go(loadgen.Go(first.start_ns, first.duration_s, tuple(later)))
    seconds = plan.rounds * 2 * (plan.window_s + plan.gap_s)
    for record, each in sides.items():
        assert each.load is not None
        (result,) = await each.load.wait_done(seconds + 60)
        # Failed iterations (recorded with their status) would only make a side look faster.
        assert result.errors <= result.iterations // 100, result.last_error
        middleware_cpu_s = sum(middlewares[record].cpu_times()[:2]) - cpu_before[record]
        measured[record].add(result, middleware_cpu_s)


async def session(
    databases: TestDatabases, template: str, work_dir: Path, plan: Plan, *, recorded_first: bool,
    mock: bool, measured: dict[bool, Measured],
) -> None:  # fmt: skip
    """Fresh databases and processes for both sides, started in the order given."""
    order = (True, False) if recorded_first else (False, True)
    dsns = {record: databases.create(template=template) for record in order}
    try:
        async with contextlib.AsyncExitStack() as stack:
            sides = {
                record: await stack.enter_async_context(
                    side(dsns[record], work_dir, record=record, mock=mock)
                )
                for record in order
            }
            await drive(sides, plan, measured)
    finally:
        for dsn in dsns.values():
            databases.drop(dsn)


def describe(label: str, measured: Measured) -> str:
    cycles = statistics.median(measured.cycles_per_s)
    client_us = 1e6 * measured.client_cpu_s / measured.requests
    middleware_us = 1e6 * measured.middleware_cpu_s / measured.requests
    return (
        f"  {label:<18} {cycles:7.1f} cycles/s ({cycles * REQUESTS_PER_CYCLE:6.0f} requests/s)"
        f" median window; CPU per request: client {client_us:5.1f} us,"
        f" middleware {middleware_us:5.1f} us"
    )


@pytest.mark.benchmark
@pytest.mark.parametrize("tier", list(PLANS))
async def test_recording_costs_at_most_five_percent(
    databases: TestDatabases,
    template_database: str,
    tmp_path: Path,
    tier: str,
    without_default_secrets: None,  # the lab's clients log in by name, as in a lab run
) -> None:
    plan = PLANS[tier]
    measured = {False: Measured(), True: Measured()}
    for number in range(plan.sessions):
        await session(
            databases, template_database, tmp_path / f"s{number}", plan,
            recorded_first=number % 2 == 1, mock=tier == "mock-middleware", measured=measured,
        )  # fmt: skip
    bare, recorded = measured[False].cycles_per_s, measured[True].cycles_per_s
    costs = [1 - r / b for b, r in zip(bare, recorded, strict=True)]
    by_session = [
        statistics.median(costs[n : n + plan.rounds]) for n in range(0, len(costs), plan.rounds)
    ]
    cost = statistics.median(costs)
    print(
        f"\n{tier}: {CLIENTS} standard clients a side, {plan.sessions} sessions of"
        f" {plan.rounds} rounds of {plan.window_s:g} s windows\n"
        + describe("without recording", measured[False]) + "\n"
        + describe("with recording", measured[True]) + "\n"
        + f"  recording costs {100 * cost:.1f}% of throughput (median of rounds;"
        f" quartiles {', '.join(f'{100 * q:.1f}%' for q in statistics.quantiles(costs))};"
        f" by session {', '.join(f'{100 * c:.1f}%' for c in by_session)})"
        f" (host load average {psutil.getloadavg()[0]:.1f} on {psutil.cpu_count()} CPUs)"
    )  # fmt: skip
    if tier == "database":  # the product's configuration; the mock tier is information
        assert cost <= MAX_COST
