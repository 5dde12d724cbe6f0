"""`courier bench pops`: Courier's database tier emptying a full queue, at 1 to 64 connections.

A fresh durable embedded PostgreSQL; `peers`' ``courier-db`` system registers one
client identity per connection and makes a fresh queue per level. For each number
of poppers P: ``messages`` messages for anyone are bulk-loaded into the queue
(``database.insert_messages``), then VACUUM ANALYZE; then P connections, dealt
round-robin over the popper processes, start together and each pops in a loop
until the queue is empty. A pop is ``Repository.read(reader, queue_id=...,
pop=True)``: one call of ``courier_read_v3``, one commit. With ``batch`` B > 0 a
call is ``Repository.pop_each(queue, Order.TIME, [reader] * B)`` instead: B pops
in one call of ``courier_exchange_v6`` and one commit.

Each process reports the latency of every call that popped something, the id of
every message popped, and when its last pop completed. pops/s is the messages
popped over the time from the common start to the last pop; every message must
be popped exactly once. The requirement: 64 poppers at least as fast as 4.
"""

from __future__ import annotations

import array
import asyncio
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import asyncpg
import numpy

from courier import errors, models
from courier.bench import database, defaults, launch, loop, peers, progress, results
from courier.db import pools, repository
from courier.lab import clientpool, workloads

NAME = "pops"
REFERENCE = 4
"""The level every other is compared with; the largest must be at least as fast."""
MIN_RATE = 100.0
"""Pops per second below which a level counts as hung (its processes are stopped)."""


# -- in a popper process ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PoppersPlan:
    """One popper process's connections (picklable)."""

    process: str
    dsn: str
    queue_id: int
    readers: tuple[int, ...]  # one connection each, popping as this client
    batch: int  # 0: one pop per call (read); else pops per call (pop_each)


@dataclass(frozen=True, slots=True)
class PoppersReport:
    """What one popper process did (picklable)."""

    process: str
    call_ns: results.LatencyArray  # every call that popped at least one message
    ids: results.LatencyArray  # every message id popped
    empty_calls: int  # calls that found the queue empty: one per connection
    last_pop_ns: int  # when the last pop completed, from the common start (0: none)


@dataclass(slots=True)
class _Tally:
    call_ns: array.array[int] = field(default_factory=lambda: array.array("q"))
    ids: array.array[int] = field(default_factory=lambda: array.array("q"))
    empty_calls: int = 0
    last_pop_ns: int = 0


def process_main(plan: PoppersPlan, control: Connection) -> None:
    """multiprocessing entry point (the ``clientpool.ProcessGroup`` protocol)."""
    loop.child(control, lambda: pop_all(plan, control))


async def pop_all(plan: PoppersPlan, control: Connection) -> PoppersReport:
    """Open one connection per reader, wait for go, pop until the queue is empty."""
    size = len(plan.readers)
    pool = await asyncpg.create_pool(
        plan.dsn, min_size=size, max_size=size, server_settings=pools.SESSION_SETTINGS
    )
    try:
        repo = repository.Repository(pool)
        start_ns = loop.Window.after(await loop.wait_for_go(control), 0.0).start_ns
        await asyncio.sleep(max(0.0, (start_ns - time.perf_counter_ns()) / 1e9))
        tallies = await asyncio.gather(
            *(_pop_until_empty(repo, plan, reader, start_ns) for reader in plan.readers)
        )
    finally:
        await pool.close()
    return PoppersReport(
        plan.process,
        _join([tally.call_ns for tally in tallies]),
        _join([tally.ids for tally in tallies]),
        sum(tally.empty_calls for tally in tallies),
        max(tally.last_pop_ns for tally in tallies),
    )


async def _pop_until_empty(
    repo: repository.Repository, plan: PoppersPlan, reader: int, start_ns: int
) -> _Tally:
    tally = _Tally()
    while True:
        began = time.perf_counter_ns()
        popped = await (_one(repo, plan, reader) if plan.batch == 0 else _many(repo, plan, reader))
        done = time.perf_counter_ns()
        if not popped:
            # Only the last few messages, held by other pops, can hide: the queue is done.
            tally.empty_calls += 1
            return tally
        tally.call_ns.append(done - began)
        tally.ids.extend(popped)
        tally.last_pop_ns = done - start_ns


async def _one(repo: repository.Repository, plan: PoppersPlan, reader: int) -> list[int]:
    try:
        return [(await repo.read(reader, queue_id=plan.queue_id, pop=True)).id]
    except errors.QueueEmpty:
        return []


async def _many(repo: repository.Repository, plan: PoppersPlan, reader: int) -> list[int]:
    outcome = await repo.pop_each(plan.queue_id, models.Order.TIME, [reader] * plan.batch)
    for answer in outcome.answers:
        if isinstance(answer, errors.CourierError) and not isinstance(answer, errors.QueueEmpty):
            raise answer
    return [answer.id for answer in outcome.answers if isinstance(answer, models.Message)]


def _join(arrays: Sequence[array.array[int]]) -> results.LatencyArray:
    parts = [numpy.frombuffer(each, dtype=numpy.int64) for each in arrays if len(each)]
    return numpy.concatenate(parts) if parts else results.no_latencies()


# -- in the parent --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Settings:
    messages: int = defaults.POPS_MESSAGES
    poppers: tuple[int, ...] = defaults.POPS_POPPERS
    batch: int = 0  # 0: single pops; else pops per call (--batched)
    processes: int = defaults.PROCESSES
    message_size: int = defaults.MESSAGE_SIZE

    def as_json(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "poppers": list(self.poppers),
            "batched": self.batch > 0,
            "batch": self.batch or 1,
            "processes": self.processes,
            "message_size": self.message_size,
            "database": "fresh embedded PostgreSQL, durable",
        }


@dataclass(frozen=True, slots=True)
class Level:
    poppers: int
    messages: int  # prefilled
    pops: int  # messages popped, counting any popped twice
    distinct: int  # different messages popped
    calls: int  # calls that popped something
    empty_calls: int
    seconds: float  # from the common start to the last pop
    latency: results.Latency | None  # of a call

    @property
    def pops_per_s(self) -> float:
        return self.pops / self.seconds if self.seconds > 0 else 0.0

    @property
    def exactly_once(self) -> bool:
        return self.pops == self.distinct == self.messages


@dataclass(frozen=True, slots=True)
class PopsResult:
    levels: list[Level]
    servers: dict[str, str]

    def ratio(self, level: Level) -> float | None:
        """pops/s over the REFERENCE level's (None without that level)."""
        reference = next((each for each in self.levels if each.poppers == REFERENCE), None)
        return None if reference is None else results.ratio(level.pops_per_s,
                                                              reference.pops_per_s)  # fmt: skip

    def verdict(self) -> list[str]:
        largest = self.levels[-1]
        ratio = self.ratio(largest)
        if ratio is None or largest.poppers <= REFERENCE:
            speed = f"no verdict: it compares the largest level with {REFERENCE} poppers"
        else:
            met = "met" if ratio >= 1 else "NOT met"
            speed = (
                f"{largest.poppers} poppers: {ratio:.3f}x the pops/s of {REFERENCE}"
                f" (needs >= 1.00): {met}"
            )
        wrong = [str(level.poppers) for level in self.levels if not level.exactly_once]
        once = "every message popped exactly once at every level"
        return [speed, once if not wrong else f"NOT {once}: see poppers {', '.join(wrong)}"]

    def as_json(self, settings: Settings) -> dict[str, Any]:
        return {
            "benchmark": NAME,
            "spec": settings.as_json(),
            "environment": results.environment(self.servers),
            "levels": [self._level_json(level) for level in self.levels],
            "verdict": {"reference_poppers": REFERENCE, "text": self.verdict()},
        }

    def _level_json(self, level: Level) -> dict[str, Any]:
        return {
            "poppers": level.poppers, "messages": level.messages, "pops": level.pops,
            "distinct": level.distinct, "calls": level.calls, "empty_calls": level.empty_calls,
            "seconds": level.seconds, "pops_per_s": level.pops_per_s,
            "latency": results.latency_json(level.latency), "ratio": self.ratio(level),
            "exactly_once": level.exactly_once,
        }  # fmt: skip


async def run(settings: Settings, phases: progress.Phases) -> PopsResult:
    prefix = f"bench-{secrets.token_hex(3)}"
    most = max(settings.poppers)
    levels = []
    async with database.for_run(None, connections=most) as (dsn, _):
        servers = {"postgresql": await database.server_version(dsn)}
        system = peers.CourierDatabase(dsn, prefix)
        async with system.running(most):
            for poppers in settings.poppers:
                async with system.level(poppers) as target:
                    assert isinstance(target, peers.DatabaseTarget)
                    await _prefill(target, settings, phases)
                    levels.append(await _drain(target, poppers, settings, phases))
    return PopsResult(levels, servers)


async def _prefill(
    target: peers.DatabaseTarget, settings: Settings, phases: progress.Phases
) -> None:
    body = workloads.message_body(settings.message_size)
    batch = database.Messages([target.queue_id], target.client_ids[:1], [None],
                              settings.messages, body)  # fmt: skip
    phases.phase(f"{settings.messages:,} messages", settings.messages, "rows")
    await database.insert_messages(target.dsn, batch, phases.advance)
    await database.settle(target.dsn)  # also clears the dead rows of the level before


async def _drain(
    target: peers.DatabaseTarget, poppers: int, settings: Settings, phases: progress.Phases
) -> Level:
    count = min(settings.processes, poppers)
    readers = target.client_ids[:poppers]
    plans = [
        PoppersPlan(f"{NAME}-{poppers}-{n}", target.dsn, target.queue_id,
                    readers[n::count], settings.batch)
        for n in range(count)
    ]  # fmt: skip
    group = clientpool.ProcessGroup(plans, process_main, PoppersReport)
    phases.phase(f"{poppers} poppers", None, "s")

    async def watch(elapsed_s: float) -> None:
        phases.advance(elapsed_s)

    timeout_s = max(60.0, settings.messages / MIN_RATE)
    reports = await launch.run(group, 0.0, timeout_s, watch)
    level = combine(poppers, settings.messages, reports)
    phases.note(f"{poppers} poppers: {level.pops_per_s:,.0f} pops/s, {level.pops:,} popped")
    return level


def combine(poppers: int, messages: int, reports: Sequence[PoppersReport]) -> Level:
    """One level from the reports of its popper processes."""
    ids = numpy.concatenate([report.ids for report in reports] or [results.no_latencies()])
    calls = numpy.concatenate([r.call_ns for r in reports] or [results.no_latencies()])
    return Level(
        poppers=poppers, messages=messages, pops=int(ids.size),
        distinct=int(numpy.unique(ids).size), calls=int(calls.size),
        empty_calls=sum(report.empty_calls for report in reports),
        seconds=max((report.last_pop_ns for report in reports), default=0) / 1e9,
        latency=results.percentiles(calls),
    )  # fmt: skip
