"""`courier bench flat`: does a pop cost the same with millions of other messages stored?

Each level of background rows gets a fresh database on one fresh durable embedded
PostgreSQL, and its own `courier serve`; a later level's database is dropped after
the level, the first level's at the end. Through the
middleware's setup client (as in `peers`) the measured client is registered and
the measured queue created; OTHER_CLIENTS other clients and OTHER_QUEUES other
queues are registered directly. The background is then bulk-loaded straight into
``courier_messages`` (``database.insert_messages``): half in the other queues for
anyone, half in the measured queue addressed to the other clients, so none of it
is visible to the measured client; then VACUUM ANALYZE. Then the client runs
WARMUP_CYCLES unmeasured cycles and ``samples`` measured ones, each a send of one
message for anyone to the measured queue and a pop of it: every pop finds exactly
one message it may take, among N it may not.

The first level (0 rows by default) is the reference, and it stays up: each later
level's cycles run in turns of TURN_CYCLES with as many on the reference (which goes
first every other turn, and warms up again before the turns start), so the two
are measured in the same minutes and the box's drift (which on a shared machine moves
latency by more than the ±10% asked) falls on both alike. Reported per level:
p50/p90/p99 of the pop and of the send latency, and each p50 over the reference's
measured in turns with it; the requirement is within ±10%.
"""

from __future__ import annotations

import array
import contextlib
import secrets
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import numpy

from courier import config
from courier.bench import database, defaults, loop, peers, progress, results
from courier.db import embedded, repository
from courier.lab import workloads

NAME = "flat"
WARMUP_CYCLES = 100
OTHER_CLIENTS = 100
OTHER_QUEUES = 10
TOLERANCE = 0.10
"""A level's p50 must be within this share of the first level's."""
ADVANCE_EVERY = 50  # cycles between progress updates: the bar must not cost latency
TURN_CYCLES = 100
"""Cycles a level runs before the reference takes its turn, and the other way round."""


@dataclass(frozen=True, slots=True)
class Settings:
    background: tuple[int, ...] = defaults.FLAT_BACKGROUND
    samples: int = defaults.FLAT_SAMPLES
    pool_size: int = defaults.SERVE.pool.max_size
    message_size: int = defaults.MESSAGE_SIZE

    def as_json(self) -> dict[str, Any]:
        return {
            "background": list(self.background),
            "samples": self.samples,
            "warmup_cycles": WARMUP_CYCLES,
            "other_clients": OTHER_CLIENTS,
            "other_queues": OTHER_QUEUES,
            "pool_size": self.pool_size,
            "message_size": self.message_size,
            "turn_cycles": TURN_CYCLES,
            "database": "fresh database per level on a fresh embedded PostgreSQL, durable;"
            " the first level's stays up to be measured in turns with each later one",
        }


@dataclass(frozen=True, slots=True)
class Alongside:
    """The reference level's latencies, measured in turns with a later level's cycles."""

    send_latency: results.Latency | None
    pop_latency: results.Latency | None
    empty_pops: int  # should be 0, as for the level itself


@dataclass(frozen=True, slots=True)
class Level:
    background: int
    stored: int  # background rows the load stored
    samples: int
    load_s: float  # bulk-loading the background
    vacuum_s: float  # the VACUUM ANALYZE after it
    total_bytes: int  # courier_messages with its indexes, after the load
    empty_pops: int  # pops that found nothing: should be 0
    send_latency: results.Latency | None
    pop_latency: results.Latency | None
    alongside: Alongside | None = None  # None for the reference level itself


@dataclass(frozen=True, slots=True)
class FlatResult:
    levels: list[Level]
    servers: dict[str, str]

    @property
    def reference(self) -> Level:
        return self.levels[0]

    def pop_ratio(self, level: Level) -> float | None:
        reference = self.reference_for(level).pop_latency
        return results.ratio(_p50(level.pop_latency), _p50(reference))

    def send_ratio(self, level: Level) -> float | None:
        reference = self.reference_for(level).send_latency
        return results.ratio(_p50(level.send_latency), _p50(reference))

    def reference_for(self, level: Level) -> Level | Alongside:
        """What ``level`` is compared with: the reference as measured in turns with it."""
        return level.alongside if level.alongside is not None else self.reference

    def verdict(self) -> list[str]:
        lines = []
        for level in self.levels[1:]:
            ratio = self.pop_ratio(level)
            shown = "-" if ratio is None else f"{ratio:.3f}x"
            lines.append(
                f"pop p50 with {level.background:,} other messages is {shown} that with"
                f" {self.reference.background:,}, measured in turns"
                f" (needs {1 - TOLERANCE:.2f}-{1 + TOLERANCE:.2f}):"
                f" {'met' if _within(ratio) else 'NOT met'}"
            )
        return lines

    def as_json(self, settings: Settings) -> dict[str, Any]:
        return {
            "benchmark": NAME,
            "spec": settings.as_json(),
            "environment": results.environment(self.servers),
            "levels": [self._level_json(level) for level in self.levels],
            "verdict": {"tolerance": TOLERANCE, "text": self.verdict()},
        }

    def _level_json(self, level: Level) -> dict[str, Any]:
        pop_ratio = self.pop_ratio(level)
        return {
            "background": level.background, "stored": level.stored, "samples": level.samples,
            "load_s": level.load_s, "vacuum_s": level.vacuum_s,
            "total_bytes": level.total_bytes, "empty_pops": level.empty_pops,
            "pop_latency": results.latency_json(level.pop_latency),
            "send_latency": results.latency_json(level.send_latency),
            "alongside": _alongside_json(level.alongside),
            "pop_p50_ratio": pop_ratio, "send_p50_ratio": self.send_ratio(level),
            "within_tolerance": _within(pop_ratio),
        }  # fmt: skip


def _alongside_json(alongside: Alongside | None) -> dict[str, Any] | None:
    if alongside is None:
        return None
    return {
        "pop_latency": results.latency_json(alongside.pop_latency),
        "send_latency": results.latency_json(alongside.send_latency),
        "empty_pops": alongside.empty_pops,
    }


def _p50(latency: results.Latency | None) -> float | None:
    return None if latency is None else latency.p50_ms


def _within(ratio: float | None) -> bool:
    return ratio is not None and abs(ratio - 1) <= TOLERANCE


async def run(settings: Settings, phases: progress.Phases) -> FlatResult:
    first, *later = settings.background
    levels = []
    with tempfile.TemporaryDirectory(prefix="courier-bench-") as work_dir:
        work = Path(work_dir)
        # Two levels are up at a time: the reference and the one measured in turns with it.
        async with database.fresh_server(connections=2 * settings.pool_size) as server:
            servers = {"postgresql": await database.server_version(server.dsn)}
            async with _prepared(server, first, settings, work, phases) as reference:
                levels.append(await _alone(reference, settings.samples, phases))
                for background in later:
                    async with _prepared(server, background, settings, work, phases) as loaded:
                        levels.append(await _in_turns(loaded, reference, settings.samples, phases))
    return FlatResult(levels, servers)


@dataclass(frozen=True, slots=True)
class _Prepared:
    """A level's database, loaded and vacuumed, with a warmed-up client on it."""

    background: int
    stored: int
    load_s: float
    vacuum_s: float
    total_bytes: int
    peer: loop.Peer

    def level(self, samples: int, measured: _Measured, alongside: Alongside | None) -> Level:
        return Level(
            background=self.background, stored=self.stored, samples=samples,
            load_s=self.load_s, vacuum_s=self.vacuum_s, total_bytes=self.total_bytes,
            empty_pops=measured.empty, send_latency=measured.send_latency(),
            pop_latency=measured.pop_latency(), alongside=alongside,
        )  # fmt: skip


@dataclass(slots=True)
class _Measured:
    """Send and pop latencies (ns) of measured cycles, and pops that found nothing."""

    sends: array.array[int] = field(default_factory=lambda: array.array("q"))
    pops: array.array[int] = field(default_factory=lambda: array.array("q"))
    empty: int = 0

    def send_latency(self) -> results.Latency | None:
        return results.percentiles(_array(self.sends))

    def pop_latency(self) -> results.Latency | None:
        return results.percentiles(_array(self.pops))


@contextlib.asynccontextmanager
async def _prepared(
    server: embedded.EmbeddedPostgres,
    background: int,
    settings: Settings,
    work: Path,
    phases: progress.Phases,
) -> AsyncIterator[_Prepared]:
    """A fresh database with ``background`` rows, its middleware and a warmed-up client."""
    token = secrets.token_hex(3)
    prefix = f"bench-{token}"  # names its clients, queues and logs, and its database
    body = workloads.message_body(settings.message_size)
    async with contextlib.AsyncExitStack() as stack:
        dsn = await stack.enter_async_context(
            database.fresh_database(server, f"courier_flat_{background}_{token}")
        )
        system = peers.Courier(
            dsn, prefix, work / f"logs-{prefix}", middlewares=1, pool_size=settings.pool_size
        )
        await stack.enter_async_context(system.running(1))
        target = await stack.enter_async_context(system.level(1))
        assert isinstance(target, peers.CourierTarget)
        others, queues = await _others(dsn, prefix)
        started = time.monotonic()
        stored = await _load(dsn, target.queue_id, others, queues, background, body, phases)
        loaded = time.monotonic()
        phases.phase(f"{background:,} rows: vacuum analyze", None, "s")
        await database.settle(dsn)
        vacuumed = time.monotonic()
        phases.note(f"{background:,} other messages: loaded in {loaded - started:.1f} s,"
                    f" vacuumed in {vacuumed - loaded:.1f} s")  # fmt: skip
        (peer,) = await target.open((0,), body, stack)
        await _warm_up(peer, background, phases)
        yield _Prepared(
            background, stored, loaded - started, vacuumed - loaded, await _table_bytes(dsn), peer
        )


async def _warm_up(peer: loop.Peer, background: int, phases: progress.Phases) -> None:
    phases.phase(f"{background:,} rows: warm-up", WARMUP_CYCLES, "cycles")
    await _cycles(peer, WARMUP_CYCLES, _Measured(), phases)


async def _alone(prepared: _Prepared, samples: int, phases: progress.Phases) -> Level:
    phases.phase(f"{prepared.background:,} rows: send + pop", samples, "cycles")
    measured = _Measured()
    await _cycles(prepared.peer, samples, measured, phases)
    return prepared.level(samples, measured, None)


async def _in_turns(
    prepared: _Prepared, reference: _Prepared, samples: int, phases: progress.Phases
) -> Level:
    """``samples`` cycles on the level and as many on the reference, TURN_CYCLES at a
    time, the two taking turns: both see the box as it was in those minutes."""
    # The reference sat idle while this level loaded: warm it up again first.
    await _warm_up(reference.peer, reference.background, phases)
    phases.phase(
        f"{prepared.background:,} rows: send + pop, in turns with {reference.background:,}",
        2 * samples, "cycles",
    )  # fmt: skip
    mine, theirs = _Measured(), _Measured()
    turns = [(prepared.peer, mine), (reference.peer, theirs)]
    done = 0
    while done < samples:
        turn = min(TURN_CYCLES, samples - done)
        for peer, into in turns:
            await _cycles(peer, turn, into)
        turns.reverse()  # whichever runs second in a turn runs first in the next
        done += turn
        phases.advance(2 * done)
    alongside = Alongside(theirs.send_latency(), theirs.pop_latency(), theirs.empty)
    return prepared.level(samples, mine, alongside)


async def _others(dsn: str, prefix: str) -> tuple[list[int], list[int]]:
    """Register the other clients and create the other queues; their ids."""
    repo = await repository.Repository.connect(dsn, config.PoolSettings(min_size=1, max_size=1))
    try:
        others = [
            (await repo.register_client(f"{prefix}-other-{n:03d}")).id for n in range(OTHER_CLIENTS)
        ]
        queues = [(await repo.create_queue(f"{prefix}-other-{n}")).id for n in range(OTHER_QUEUES)]
    finally:
        await repo.close()
    return others, queues


async def _load(
    dsn: str,
    queue_id: int,
    others: list[int],
    queues: list[int],
    background: int,
    body: str,
    phases: progress.Phases,
) -> int:
    """Half the background in the other queues for anyone, half in the measured queue
    addressed to the other clients."""
    elsewhere = background // 2
    batches = (
        database.Messages(queues, others, [None], elsewhere, body),
        database.Messages([queue_id], others, others, background - elsewhere, body),
    )
    phases.phase(f"{background:,} background rows", background or None, "rows")
    done = 0
    for batch in batches:
        done += await database.insert_messages(dsn, batch, _advance_from(phases, done))
    return done


def _advance_from(phases: progress.Phases, start: int) -> Callable[[int], None]:
    return lambda stored: phases.advance(start + stored)


async def _table_bytes(dsn: str) -> int:
    connection = await asyncpg.connect(dsn)
    try:
        return (await database.sample_messages(connection, 0.0)).total_bytes
    finally:
        await connection.close()


async def _cycles(
    peer: loop.Peer, count: int, into: _Measured, phases: progress.Phases | None = None
) -> None:
    """``count`` cycles: send one message, pop one; each timed into ``into``."""
    for n in range(count):
        began = time.perf_counter_ns()
        await peer.send()
        sent = time.perf_counter_ns()
        got = await peer.pop()
        popped = time.perf_counter_ns()
        into.sends.append(sent - began)
        into.pops.append(popped - sent)
        into.empty += not got
        if phases is not None and n % ADVANCE_EVERY == 0:
            phases.advance(n)
    if phases is not None:
        phases.advance(count)


def _array(values: Sequence[int]) -> results.LatencyArray:
    return numpy.array(values, dtype=numpy.int64)
