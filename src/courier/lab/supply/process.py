"""A benchmark load process: the agents of a share of the locations, recorded.

Started by the benchmark run like the lab's load generators (``clientpool``'s
protocol): it logs in one client per location, subscribes each location to its
topics, reports ready, and at the common start instant runs every agent's handlers
and drivers until the run's end.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from courier.client import AsyncClient
from courier.lab import driver, loadgen, process_recording
from courier.lab.supply import agents

Address = tuple[str, int]
STOP_GRACE_S = 10.0
"""After the run's end, how long the agents may take to finish the calls in flight
before they are cut short (well inside the runner's wait for the processes)."""


@dataclass(frozen=True, slots=True)
class Location:
    """One location to run: name, type, its client's id and servers (failover order)."""

    name: str
    type: str
    client_id: int
    servers: tuple[Address, ...]


@dataclass(frozen=True)
class AgentPlan:
    """Everything one process needs; picklable."""

    process: str
    run_dir: Path
    run_id: str
    locations: tuple[Location, ...]
    world: agents.World
    seed: int = 1


@dataclass(slots=True)
class AgentResult:
    process: str
    locations: int
    requests: int = 0
    iterations: int = 0
    errors: int = 0
    dropped: int = 0
    last_error: str = ""
    cut_short: int = 0  # agents cancelled at the end: their calls did not come back


def process_main(plan: AgentPlan, control: Any) -> None:
    """multiprocessing entry point; ``control`` is the child end of a Pipe."""
    loadgen.serve_process(control, lambda ready: run_process(plan, ready))


async def run_process(plan: AgentPlan, ready: Callable[[], Awaitable[loadgen.Go]]) -> AgentResult:
    recorded = process_recording.ProcessRecording.for_clients(
        plan.run_dir, plan.run_id, plan.process
    )
    running = [_agent(plan, location, recorded) for location in plan.locations]
    try:
        await asyncio.gather(*map(_open, running, plan.locations))
        go = await ready()
        await asyncio.sleep(max(0.0, (go.start_ns - time.time_ns()) / 1e9))
        stop_at = time.monotonic() + (go.start_ns + int(go.duration_s * 1e9) - time.time_ns()) / 1e9
        cut_short = await _run_until(running, stop_at)
    finally:
        await asyncio.gather(*(agent.client.close() for agent in running), return_exceptions=True)
        recorded.close()
    result = _sum_up(plan, running)
    result.cut_short = cut_short
    return result


async def _run_until(running: list[agents.Agent], stop_at: float) -> int:
    """Run every agent until ``stop_at`` (monotonic); one still busy STOP_GRACE_S later
    (its calls stuck in an overloaded system) is cancelled. How many were."""
    tasks = [asyncio.create_task(agent.run(stop_at)) for agent in running]
    grace = max(0.0, stop_at + STOP_GRACE_S - time.monotonic())
    _, pending = await asyncio.wait(tasks, timeout=grace)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    return len(pending)


def _agent(
    plan: AgentPlan, location: Location, recorded: process_recording.ProcessRecording
) -> agents.Agent:
    tally = driver.Tally()
    client = AsyncClient(location.servers, recorder=recorded.client_recorder(location.type, tally))
    seed = f"{plan.seed}:{plan.run_id}:{location.name}"
    return agents.Agent(location.name, location.type, client, plan.world, seed, tally)


async def _open(agent: agents.Agent, location: Location) -> None:
    await agent.client.open(client_id=location.client_id)
    await agent.subscribe()


def _sum_up(plan: AgentPlan, running: list[agents.Agent]) -> AgentResult:
    result = AgentResult(plan.process, len(running))
    for agent in running:
        result.requests += agent.tally.requests
        result.iterations += agent.tally.iterations
        result.errors += agent.tally.errors
        result.dropped += agent.tally.dropped_arrivals
        result.last_error = agent.tally.last_error or result.last_error
    return result
