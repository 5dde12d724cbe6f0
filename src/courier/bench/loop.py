"""The closed loop, in one client process: many clients on one uvloop loop.

Every client repeats "send a message, then pop one" on the level's one shared
queue, back to back, from the common start instant until the warm-up and the
measured window have passed. A request counts (and its latency is kept) when it
completes inside the measured window; requests in flight at its end finish
uncounted. Each kept latency is tagged with the interval of the window it completed
in (``Window.interval``; one interval unless the plan asks for several), so the
parent can tell the intervals of a long run apart. The process then closes its
clients and reports to the parent.

The systems differ only in their ``Target`` (picklable: what a process needs to
reach the system) and ``Peer`` (one client's send and pop).
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import resource
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, Protocol

import numpy

from courier import errors
from courier.bench import results
from courier.lab import loadgen

ERROR_PAUSE_S = 0.01
"""After a failed request, so that a broken client does not spin."""


class Peer(Protocol):
    """One benchmark client of some system: one request each, of one message or of a
    batch of them."""

    async def send(self) -> int:
        """Send; how many messages went."""
        ...

    async def pop(self) -> int:
        """Pop; how many messages came (0: the queue was empty)."""
        ...


class Target(Protocol):
    """How a client process reaches one system at one level (picklable)."""

    async def open(
        self, clients: Sequence[int], body: str, stack: contextlib.AsyncExitStack
    ) -> list[Peer]:
        """Connect the given clients (indices into the level's clients); ``stack``
        closes whatever they hold when the process is done."""
        ...


@dataclass(frozen=True, slots=True)
class ClientsPlan:
    """One client process's share of a level."""

    process: str
    target: Target
    clients: tuple[int, ...]
    body: str
    warmup_s: float
    interval_s: float | None = None  # None: the measured window is one interval


@dataclass(frozen=True, slots=True)
class Window:
    """perf_counter_ns instants: the clients start, measure, and stop; and the length
    of the intervals the measured window is cut into (0: one interval)."""

    start_ns: int
    measure_from_ns: int
    until_ns: int
    interval_ns: int = 0

    @classmethod
    def after(cls, go: loadgen.Go, warmup_s: float, interval_s: float | None = None) -> Window:
        # The go names a wall-clock instant; the loop times itself with perf_counter.
        start = time.perf_counter_ns() + go.start_ns - time.time_ns()
        measure_from = start + round(warmup_s * 1e9)
        until = measure_from + round(go.duration_s * 1e9)
        return cls(start, measure_from, until, round((interval_s or 0) * 1e9))

    def measures(self, instant_ns: int) -> bool:
        return self.measure_from_ns <= instant_ns < self.until_ns

    def interval(self, instant_ns: int) -> int:
        """The interval (0 first) a measured instant falls in; an instant on a boundary
        belongs to the interval it opens."""
        if not self.interval_ns:
            return 0
        return (instant_ns - self.measure_from_ns) // self.interval_ns


def _latencies() -> array.array[int]:
    return array.array("q")  # compact: a long run keeps millions of samples


def _intervals() -> array.array[int]:
    return array.array("i")


@dataclass(slots=True)
class Tally:
    """One client's measured requests: each latency and the interval it completed in."""

    send_ns: array.array[int] = field(default_factory=_latencies)
    pop_ns: array.array[int] = field(default_factory=_latencies)
    empty_pops: int = 0
    errors: int = 0
    last_error: str = ""
    sent_messages: int = 0
    popped_messages: int = 0
    send_interval: array.array[int] = field(default_factory=_intervals)
    pop_interval: array.array[int] = field(default_factory=_intervals)


def process_main(plan: ClientsPlan, control: Connection) -> None:
    """multiprocessing entry point (the ``clientpool.ProcessGroup`` protocol)."""
    child(control, lambda: run_clients(plan, control))


def child(control: Connection, work: Callable[[], Coroutine[Any, Any, object]]) -> None:
    """The body of a benchmark's child process: run ``work`` on uvloop and send the
    parent its result, or the error's text (as a lab load generator does)."""
    _allow_many_sockets()
    loadgen.serve_process(control, lambda _ready: work())


def _allow_many_sockets() -> None:
    """Hundreds of clients need more descriptors than a soft limit of 1024 may allow."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


async def run_clients(plan: ClientsPlan, control: Connection) -> results.ClientsReport:
    """Open the clients, say ready, wait for go, drive them, close them."""
    tallies = [Tally() for _ in plan.clients]
    async with contextlib.AsyncExitStack() as stack:
        peers = await plan.target.open(plan.clients, plan.body, stack)
        go = await wait_for_go(control)
        window = Window.after(go, plan.warmup_s, plan.interval_s)
        pairs = zip(peers, tallies, strict=True)
        await asyncio.gather(*(drive(peer, window, tally) for peer, tally in pairs))
    return report(plan.process, tallies)


async def wait_for_go(control: Connection) -> loadgen.Go:
    """Say ready, then wait for the parent's go."""
    control.send("ready")
    message = await asyncio.get_running_loop().run_in_executor(None, control.recv)
    if not isinstance(message, loadgen.Go):
        raise errors.CourierError(f"client process told {message!r} instead of go")
    return message


async def drive(peer: Peer, window: Window, tally: Tally) -> None:
    """Send, then pop, until the window ends; keep the latencies that end inside it."""
    await asyncio.sleep(max(0.0, (window.start_ns - time.perf_counter_ns()) / 1e9))
    while time.perf_counter_ns() < window.until_ns:
        try:
            began = time.perf_counter_ns()
            went = await peer.send()
            sent = time.perf_counter_ns()
            if window.measures(sent):
                tally.send_ns.append(sent - began)
                tally.send_interval.append(window.interval(sent))
                tally.sent_messages += went
            got = await peer.pop()
            popped = time.perf_counter_ns()
            if window.measures(popped):
                tally.pop_ns.append(popped - sent)
                tally.pop_interval.append(window.interval(popped))
                tally.empty_pops += not got
                tally.popped_messages += got
        except Exception as exc:  # any system's failure: count it, go on, report the last
            tally.errors += 1
            tally.last_error = f"{type(exc).__name__}: {exc}"
            await asyncio.sleep(ERROR_PAUSE_S)


def report(process: str, tallies: Sequence[Tally]) -> results.ClientsReport:
    last_errors = [tally.last_error for tally in tallies if tally.last_error]
    return results.ClientsReport(
        process=process,
        send_ns=_join([tally.send_ns for tally in tallies], numpy.int64),
        pop_ns=_join([tally.pop_ns for tally in tallies], numpy.int64),
        empty_pops=sum(tally.empty_pops for tally in tallies),
        errors=sum(tally.errors for tally in tallies),
        last_error=last_errors[-1] if last_errors else "",
        sent_messages=sum(tally.sent_messages for tally in tallies),
        popped_messages=sum(tally.popped_messages for tally in tallies),
        send_interval=_join([tally.send_interval for tally in tallies], numpy.int32),
        pop_interval=_join([tally.pop_interval for tally in tallies], numpy.int32),
    )


def _join(arrays: Sequence[array.array[int]], dtype: type[numpy.signedinteger[Any]]) -> Any:
    parts = [numpy.frombuffer(each, dtype=dtype) for each in arrays if len(each)]
    return numpy.concatenate(parts) if parts else numpy.zeros(0, dtype=dtype)
