"""The parent's side of a benchmark's client processes: start them together, collect them.

``run`` spawns one process per plan (``clientpool.ProcessGroup``), waits until every
one is ready, gives them one common start instant, and calls ``watch`` with the
seconds since that instant while they work (the progress bar; the churn benchmark
samples the database from it too). Whatever happens, every process it started is
stopped before it returns. ``closed_loop`` is ``run`` for ``loop``'s closed loop:
the clients dealt round-robin over the processes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from courier.bench import loop, results
from courier.lab import clientpool, loadgen, workloads

START_DELAY_S = 0.2
"""Between the go and the common start instant, so every process starts together."""
FINISH_GRACE_S = 30.0
POLL_S = 0.1

ResultT = TypeVar("ResultT")

Watch = Callable[[float], Awaitable[None]]
"""Called about every POLL_S with the seconds since the common start instant."""


async def run(
    group: clientpool.ProcessGroup[ResultT], duration_s: float, timeout_s: float, watch: Watch
) -> list[ResultT]:
    """Launch the group, start it at one instant, wait for its results (at most
    ``timeout_s`` after the start), stop it."""
    group.launch()
    try:
        await group.wait_ready()
        go = loadgen.Go(time.time_ns() + round(START_DELAY_S * 1e9), duration_s)
        group.go(go)
        return await _wait_done(group, go, timeout_s + START_DELAY_S, watch)
    finally:
        await group.stop()


async def _wait_done(
    group: clientpool.ProcessGroup[ResultT], go: loadgen.Go, timeout_s: float, watch: Watch
) -> list[ResultT]:
    done = asyncio.create_task(group.wait_done(timeout_s))
    try:
        while not done.done():
            await watch(max(0.0, (time.time_ns() - go.start_ns) / 1e9))
            await asyncio.wait({done}, timeout=POLL_S)
        return done.result()
    finally:
        done.cancel()  # interrupted: stop waiting before the processes are stopped


@dataclass(frozen=True, slots=True)
class Loop:
    """How a closed loop runs: its processes, message size, and timing."""

    processes: int
    message_size: int
    warmup_s: float
    duration_s: float
    interval_s: float | None = None  # None: no intervals

    @property
    def seconds(self) -> float:
        return self.warmup_s + self.duration_s


async def closed_loop(
    name: str, target: loop.Target, clients: int, shape: Loop, watch: Watch
) -> Sequence[results.ClientsReport]:
    """``clients`` clients of ``target`` in the closed loop, from every process's report."""
    count = min(shape.processes, clients)
    body = workloads.message_body(shape.message_size)
    shares = [tuple(range(n, clients, count)) for n in range(count)]  # round-robin
    plans = [
        loop.ClientsPlan(f"{name}-clients-{n}", target, share, body, shape.warmup_s,
                         shape.interval_s)
        for n, share in enumerate(shares)
    ]  # fmt: skip
    group = clientpool.ProcessGroup(plans, loop.process_main, results.ClientsReport)
    return await run(group, shape.duration_s, shape.seconds + FINISH_GRACE_S, watch)
