"""`courier bench flat`: does a pop cost the same with millions of other messages stored?

Each level of background rows gets a fresh database (dropped after the level) on
one fresh durable embedded PostgreSQL, and its own `courier serve`. Through the
middleware's setup client (as in `peers`) the measured client is registered and
the measured queue created; OTHER_CLIENTS other clients and OTHER_QUEUES other
queues are registered directly. The background is then bulk-loaded straight into
``courier_messages`` (``database.insert_messages``): half in the other queues for
anyone, half in the measured queue addressed to the other clients, so none of it
is visible to the measured client; then VACUUM ANALYZE. Then the client runs
WARMUP_CYCLES unmeasured cycles and ``samples`` measured ones, each a send of one
message for anyone to the measured queue and a pop of it: every pop finds exactly
one message it may take, among N it may not.

Reported per level: p50/p90/p99 of the pop and of the send latency, and each p50
over the first level's (0 rows by default); the requirement is within ±10%.
"""

from __future__ import annotations

import array
import contextlib
import secrets
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import numpy

from courier import config
from courier.bench import database, defaults, loop, peers, progress, results
from courier.db import repository
from courier.lab import workloads

NAME = "flat"
WARMUP_CYCLES = 100
OTHER_CLIENTS = 100
OTHER_QUEUES = 10
TOLERANCE = 0.10
"""A level's p50 must be within this share of the first level's."""
ADVANCE_EVERY = 50  # cycles between progress updates: the bar must not cost latency


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
            "database": "fresh database per level on a fresh embedded PostgreSQL, durable",
        }


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


@dataclass(frozen=True, slots=True)
class FlatResult:
    levels: list[Level]
    servers: dict[str, str]

    @property
    def reference(self) -> Level:
        return self.levels[0]

    def pop_ratio(self, level: Level) -> float | None:
        return results.ratio(_p50(level.pop_latency), _p50(self.reference.pop_latency))

    def send_ratio(self, level: Level) -> float | None:
        return results.ratio(_p50(level.send_latency), _p50(self.reference.send_latency))

    def verdict(self) -> list[str]:
        lines = []
        for level in self.levels[1:]:
            ratio = self.pop_ratio(level)
            shown = "-" if ratio is None else f"{ratio:.3f}x"
            lines.append(
                f"pop p50 with {level.background:,} other messages is {shown} that with"
                f" {self.reference.background:,} (needs {1 - TOLERANCE:.2f}-{1 + TOLERANCE:.2f}):"
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
            "pop_p50_ratio": pop_ratio, "send_p50_ratio": self.send_ratio(level),
            "within_tolerance": _within(pop_ratio),
        }  # fmt: skip


def _p50(latency: results.Latency | None) -> float | None:
    return None if latency is None else latency.p50_ms


def _within(ratio: float | None) -> bool:
    return ratio is not None and abs(ratio - 1) <= TOLERANCE


async def run(settings: Settings, phases: progress.Phases) -> FlatResult:
    levels = []
    with tempfile.TemporaryDirectory(prefix="courier-bench-") as work_dir:
        async with database.fresh_server(connections=settings.pool_size) as server:
            servers = {"postgresql": await database.server_version(server.dsn)}
            for background in settings.background:
                name = f"courier_flat_{background}"
                async with database.fresh_database(server, name) as dsn:
                    levels.append(await _level(dsn, background, settings, Path(work_dir), phases))
    return FlatResult(levels, servers)


async def _level(
    dsn: str, background: int, settings: Settings, work: Path, phases: progress.Phases
) -> Level:
    prefix = f"bench-{secrets.token_hex(3)}"
    system = peers.Courier(dsn, prefix, work / "logs", middlewares=1, pool_size=settings.pool_size)
    body = workloads.message_body(settings.message_size)
    async with system.running(1), system.level(1) as target:
        assert isinstance(target, peers.CourierTarget)
        others, queues = await _others(dsn, prefix)
        started = time.monotonic()
        stored = await _load(dsn, target.queue_id, others, queues, background, body, phases)
        loaded = time.monotonic()
        phases.phase(f"{background:,} rows: vacuum analyze", None, "s")
        await database.settle(dsn)
        vacuumed = time.monotonic()
        total_bytes = await _table_bytes(dsn)
        async with contextlib.AsyncExitStack() as stack:
            (peer,) = await target.open((0,), body, stack)
            cycles = WARMUP_CYCLES + settings.samples
            phases.phase(f"{background:,} rows: send + pop", cycles, "cycles")
            sends, pops, empty = await _cycles(peer, settings.samples, phases)
    phases.note(f"{background:,} other messages: loaded in {loaded - started:.1f} s,"
                f" vacuumed in {vacuumed - loaded:.1f} s")  # fmt: skip
    return Level(
        background=background, stored=stored, samples=settings.samples,
        load_s=loaded - started, vacuum_s=vacuumed - loaded, total_bytes=total_bytes,
        empty_pops=empty, send_latency=results.percentiles(sends),
        pop_latency=results.percentiles(pops),
    )  # fmt: skip


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
    peer: loop.Peer, samples: int, phases: progress.Phases
) -> tuple[results.LatencyArray, results.LatencyArray, int]:
    """Send one message, pop one; time each; keep the cycles after the warm-up."""
    sends, pops, empty = array.array("q"), array.array("q"), 0
    for n in range(WARMUP_CYCLES + samples):
        began = time.perf_counter_ns()
        await peer.send()
        sent = time.perf_counter_ns()
        got = await peer.pop()
        popped = time.perf_counter_ns()
        if n >= WARMUP_CYCLES:
            sends.append(sent - began)
            pops.append(popped - sent)
            empty += not got
        if n % ADVANCE_EVERY == 0:
            phases.advance(n)
    phases.advance(WARMUP_CYCLES + samples)
    return _array(sends), _array(pops), empty


def _array(values: Sequence[int]) -> results.LatencyArray:
    return numpy.array(values, dtype=numpy.int64)
