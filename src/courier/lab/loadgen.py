"""One load-generator process: many ``AsyncClient``s on one uvloop loop, recorded.

The runner starts several of these (multiprocessing, spawn) so that generating load
is never the bottleneck; ``courier lab clients`` runs one by hand, on any host.
A process connects and logs in all its clients, reports ready, waits for the
common start instant, drives every client until the stop instant, logs out and
finishes its record files.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvloop

from courier import errors, gctuning
from courier.client import AsyncClient
from courier.lab import driver, process_recording, workloads

Address = tuple[str, int]


@dataclass(frozen=True, slots=True)
class ClientSlot:
    """One client to run: its name, behaviour, servers (in failover order) and id."""

    name: str
    behaviour: str
    servers: tuple[Address, ...]
    client_id: int = 0  # filled in once the runner has registered the client


@dataclass(frozen=True, slots=True)
class ProcessPlan:
    """Everything a load-generator process needs; picklable for multiprocessing."""

    process: str
    run_dir: Path
    run_id: str
    slots: tuple[ClientSlot, ...]
    queues: workloads.QueueIds
    message_size: int = 200
    priorities: Any = "uniform"
    targets_per_message: int = 1
    think_time_s: float = 0.0
    rate: float = 0.0
    request_limit: int = 0
    seed: int = 1
    peers: dict[str, tuple[int, ...]] = field(default_factory=dict)
    clock_offset_ns: int = 0
    record: bool = True  # False only to measure what recording costs (the benchmark)


@dataclass(frozen=True, slots=True)
class Window:
    """A stretch of wall-clock time to drive the clients in."""

    start_ns: int
    duration_s: float


@dataclass(frozen=True, slots=True)
class Go:
    """The runner's start signal: wall-clock start instant and run length.

    ``later`` windows, each after the one before, make the clients drive again after
    a pause: interleaving the windows of two systems puts both under the same
    conditions of the host (the recording benchmark does that).
    """

    start_ns: int
    duration_s: float
    later: tuple[Window, ...] = ()

    @property
    def windows(self) -> tuple[Window, ...]:
        return (Window(self.start_ns, self.duration_s), *self.later)


@dataclass(slots=True)
class ProcessResult:
    process: str
    clients: int
    requests: int = 0
    iterations: int = 0
    errors: int = 0
    last_error: str = ""
    cpu_s: float = 0.0  # CPU time of this process while it drove the load
    window_iterations: list[int] = field(default_factory=list)  # per window of the Go
    window_busy_s: list[float] = field(default_factory=list)  # start to last iteration's end
    files: list[Path] = field(default_factory=list)


@dataclass(slots=True)
class RunningClient:
    slot: ClientSlot
    client: AsyncClient
    tally: driver.Tally
    context: workloads.Context | None = None


def process_main(plan: ProcessPlan, control: Any) -> None:
    """multiprocessing entry point; ``control`` is the child end of a Pipe."""
    serve_process(control, lambda ready: run_process(plan, ready))


def serve_process(
    control: Any, main: Callable[[Callable[[], Awaitable[Go]]], Coroutine[Any, Any, Any]]
) -> None:
    """Run ``main(ready)`` on uvloop in this child process and send its result (or
    the error's text) to the runner; ``ready()`` says ready and waits for go."""
    os.setpgrp()  # Ctrl-C reaches the parent only, which stops us itself
    gctuning.tune_for_serving()
    try:
        control.send(uvloop.run(main(_pipe_go(control))))
    except Exception as exc:
        control.send(f"{type(exc).__name__}: {exc}")
        raise
    finally:
        control.close()


def _pipe_go(control: Any) -> Callable[[], Awaitable[Go]]:
    async def wait_for_go() -> Go:
        control.send("ready")
        loop = asyncio.get_running_loop()
        message = await loop.run_in_executor(None, control.recv)
        if not isinstance(message, Go):
            raise errors.CourierError(f"load generator told {message!r} instead of go")
        return message

    return wait_for_go


async def run_process(plan: ProcessPlan, ready: Callable[[], Awaitable[Go]]) -> ProcessResult:
    """Open every client, wait for go, drive them all, close; returns the totals."""
    result = ProcessResult(plan.process, len(plan.slots))
    recorded = None
    if plan.record:
        recorded = process_recording.ProcessRecording.for_clients(
            plan.run_dir, plan.run_id, plan.process, clock_offset_ns=plan.clock_offset_ns
        )
    running = [_new_client(slot, recorded) for slot in plan.slots]
    try:
        await asyncio.gather(*(_open(plan, each) for each in running))
        await asyncio.gather(*(_setup(each) for each in running))
        go = await ready()
        cpu_before = time.process_time()
        await _drive_all(plan, running, go, result)
        result.cpu_s = time.process_time() - cpu_before
    finally:
        await asyncio.gather(*(each.client.close() for each in running), return_exceptions=True)
        result.files = recorded.close() if recorded is not None else []
    _sum_up(result, running)
    return result


def _new_client(
    slot: ClientSlot, recorded: process_recording.ProcessRecording | None
) -> RunningClient:
    tally = driver.Tally()
    recorder = None
    if recorded is not None:
        recorder = recorded.client_recorder(slot.behaviour, tally)
    return RunningClient(slot, AsyncClient(slot.servers, recorder=recorder), tally)


async def _open(plan: ProcessPlan, running: RunningClient) -> None:
    """Connect and log in; the login is the first request (no greeting PING before it)."""
    slot, client = running.slot, running.client
    await client.open(client_id=slot.client_id)
    assert client.client_id is not None
    running.context = workloads.Context(
        client=client,
        me=client.client_id,
        name=slot.name,
        queues=plan.queues,
        body=workloads.message_body(plan.message_size),
        priorities=workloads.PriorityChoice.parse(plan.priorities),
        targets_per_message=plan.targets_per_message,
        peers=plan.peers.get(slot.behaviour, ()),
        rng=random.Random(f"{plan.seed}:{plan.run_id}:{slot.name}"),
    )


async def _setup(running: RunningClient) -> None:
    setup = workloads.SETUPS.get(running.slot.behaviour)
    if setup is not None and running.context is not None:
        await setup(running.context)


async def _drive_all(
    plan: ProcessPlan, running: list[RunningClient], go: Go, result: ProcessResult
) -> None:
    """Drive every client in each window of ``go``, noting what each window did."""
    for window in go.windows:
        before = sum(each.tally.iterations for each in running)
        await _drive_window(plan, running, window)
        result.window_busy_s.append((time.time_ns() - window.start_ns) / 1e9)
        result.window_iterations.append(sum(each.tally.iterations for each in running) - before)


async def _drive_window(plan: ProcessPlan, running: list[RunningClient], window: Window) -> None:
    await asyncio.sleep(max(0.0, (window.start_ns - time.time_ns()) / 1e9))
    # The window ends at its wall-clock instant, however late the sleep woke.
    end_ns = window.start_ns + int(window.duration_s * 1e9)
    pacing = driver.Pacing(
        stop_at=time.monotonic() + (end_ns - time.time_ns()) / 1e9,
        request_limit=plan.request_limit,
        think_time_s=plan.think_time_s,
        rate=plan.rate,
    )
    for each in running:
        each.tally.requests = 0  # the limit counts load requests only
    await asyncio.gather(
        *(
            driver.drive(
                each.context, workloads.BEHAVIOURS[each.slot.behaviour], pacing, each.tally
            )
            for each in running
            if each.context is not None
        )
    )


def _sum_up(result: ProcessResult, running: list[RunningClient]) -> None:
    for each in running:
        tally = each.tally
        result.requests += tally.requests
        result.iterations += tally.iterations
        result.errors += tally.errors
        result.last_error = tally.last_error or result.last_error
