"""`courier bench churn`: the peers closed loop through Courier for minutes, interval by interval.

Does Courier hold its throughput while every message is inserted once and deleted
once, for a long time? The run is `courier bench peers`' ``courier`` system at one
level (a fresh durable embedded PostgreSQL, M middleware, N clients sending a
200-byte durable message and popping one on one shared queue), measured as a
series of intervals. The client processes tag each latency with the interval it
completed in; between them, the parent samples ``courier_messages`` (live and
dead rows, autovacuum runs, table + index size) at the start of the measured
window and at the end of every interval.

The verdict: the last interval's throughput as a share of the first's (it needs
to be at least 90%), and the most dead rows any sample saw.
"""

from __future__ import annotations

import secrets
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

from courier.bench import database, defaults, intervals, launch, loop, peers, progress, results

NAME = "churn"
THROUGHPUT_NEEDED = 0.90
"""The last interval's throughput over the first's must be at least this."""

Interval = intervals.Interval


@dataclass(frozen=True, slots=True)
class Settings:
    clients: int = defaults.CHURN_CLIENTS
    middlewares: int = defaults.MIDDLEWARES
    duration_s: float = defaults.CHURN_DURATION_S
    interval_s: float = defaults.CHURN_INTERVAL_S
    warmup_s: float = defaults.WARMUP_S
    processes: int = defaults.PROCESSES
    pool_size: int = defaults.SERVE.pool.max_size
    message_size: int = defaults.MESSAGE_SIZE

    @property
    def loop(self) -> launch.Loop:
        return launch.Loop(
            self.processes, self.message_size, self.warmup_s, self.duration_s, self.interval_s
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "clients": self.clients,
            "middlewares": self.middlewares,
            "duration_s": self.duration_s,
            "interval_s": self.interval_s,
            "warmup_s": self.warmup_s,
            "processes": self.processes,
            "pool_size": self.pool_size,
            "message_size": self.message_size,
            "database": "fresh embedded PostgreSQL, durable",
        }


@dataclass(frozen=True, slots=True)
class ChurnResult:
    intervals: list[Interval]
    samples: list[database.TableSample]  # at the measured start, then each interval's end
    totals: results.LevelResult  # the whole measured window
    servers: dict[str, str]

    def sample_after(self, interval: Interval) -> database.TableSample | None:
        index = interval.index + 1
        return self.samples[index] if index < len(self.samples) else None

    @property
    def throughput_ratio(self) -> float | None:
        """The last interval's operations per second over the first's."""
        return results.ratio(self.intervals[-1].ops_per_s, self.intervals[0].ops_per_s)

    @property
    def most_dead_rows(self) -> int | None:
        return max((sample.dead_rows for sample in self.samples), default=None)

    def verdict(self) -> list[str]:
        ratio = self.throughput_ratio
        if ratio is None:
            throughput = "the first interval completed no request: no throughput to compare"
        else:
            met = "met" if ratio >= THROUGHPUT_NEEDED else "NOT met"
            throughput = (
                f"last interval's throughput is {ratio:.1%} of the first"
                f" (needs >= {THROUGHPUT_NEEDED:.0%}): {met}"
            )
        dead = self.most_dead_rows
        return [
            throughput,
            "no sample of dead rows" if dead is None else f"dead rows stayed at most {dead:,}",
        ]

    def as_json(self, settings: Settings) -> dict[str, Any]:
        ratio = self.throughput_ratio
        return {
            "benchmark": NAME,
            "spec": settings.as_json(),
            "environment": results.environment(self.servers),
            "intervals": [self._interval_json(interval) for interval in self.intervals],
            "samples": [_sample_json(sample) for sample in self.samples],
            "totals": self.totals.as_json(),
            "verdict": {
                "throughput_ratio": ratio,
                "throughput_needed": THROUGHPUT_NEEDED,
                "throughput_met": ratio is not None and ratio >= THROUGHPUT_NEEDED,
                "most_dead_rows": self.most_dead_rows,
                "text": self.verdict(),
            },
        }

    def _interval_json(self, interval: Interval) -> dict[str, Any]:
        sample = self.sample_after(interval)
        return {
            "index": interval.index, "start_s": interval.start_s, "end_s": interval.end_s,
            "sends": interval.sends, "pops": interval.pops, "operations": interval.operations,
            "ops_per_s": interval.ops_per_s, "cycles_per_s": interval.cycles_per_s,
            "latency": results.latency_json(interval.latency),
            "send_latency": results.latency_json(interval.send_latency),
            "pop_latency": results.latency_json(interval.pop_latency),
            "table": None if sample is None else _sample_json(sample),
        }  # fmt: skip


def _sample_json(sample: database.TableSample) -> dict[str, Any]:
    return {
        "at_s": round(sample.at_s, 3), "live_rows": sample.live_rows,
        "dead_rows": sample.dead_rows, "autovacuums": sample.autovacuums,
        "total_bytes": sample.total_bytes,
    }  # fmt: skip


class Sampler:
    """Samples courier_messages when the measured window starts and as each interval
    ends, fed by the parent's watch (seconds since the common start instant)."""

    def __init__(
        self, connection: asyncpg.Connection, settings: Settings, phases: progress.Phases
    ) -> None:
        self._connection = connection
        self._warmup_s = settings.warmup_s
        self._due = [0.0] + [end for _, end in intervals.bounds(settings.duration_s,
                                                                 settings.interval_s)]  # fmt: skip
        self._phases = phases
        self._zero = time.monotonic()  # the common start, once the first watch tells it
        self.samples: list[database.TableSample] = []

    async def watch(self, elapsed_s: float) -> None:
        self._zero = time.monotonic() - elapsed_s
        while self._due and elapsed_s - self._warmup_s >= self._due[0]:
            await self._take(elapsed_s - self._warmup_s)

    async def finish(self) -> None:
        """Take the samples still due (the clients stop just after the last end)."""
        while self._due:
            await self._take(time.monotonic() - self._zero - self._warmup_s)

    async def _take(self, at_s: float) -> None:
        self._due.pop(0)
        sample = await database.sample_messages(self._connection, at_s)
        self.samples.append(sample)
        if len(self.samples) > 1:
            self._phases.note(
                f"interval {len(self.samples) - 1} ended at {at_s:.1f} s: "
                f"{sample.live_rows:,} live rows, {sample.dead_rows:,} dead, "
                f"{sample.autovacuums} autovacuums, {sample.total_bytes / 2**20:.1f} MiB"
            )


async def run(settings: Settings, phases: progress.Phases) -> ChurnResult:
    """Start the database and middleware, run the loop, sample the table, stop it all."""
    prefix = f"bench-{secrets.token_hex(3)}"
    connections = settings.middlewares * settings.pool_size
    with tempfile.TemporaryDirectory(prefix="courier-bench-") as work_dir:
        async with database.for_run(None, connections=connections) as (dsn, _):
            servers = {"postgresql": await database.server_version(dsn)}
            system = peers.Courier(
                dsn, prefix, Path(work_dir) / "logs", middlewares=settings.middlewares,
                pool_size=settings.pool_size,
            )  # fmt: skip
            async with system.running(settings.clients), system.level(settings.clients) as target:
                reports, samples = await _measure(dsn, target, settings, phases)
    shape = settings.loop
    return ChurnResult(
        intervals=intervals.combine(reports, shape.duration_s, settings.interval_s),
        samples=samples,
        totals=results.combine(defaults.COURIER, settings.clients, shape.duration_s, reports),
        servers=servers,
    )


async def _measure(
    dsn: str, target: loop.Target, settings: Settings, phases: progress.Phases
) -> tuple[Sequence[results.ClientsReport], list[database.TableSample]]:
    shape = settings.loop
    connection = await asyncpg.connect(dsn)
    try:
        sampler = Sampler(connection, settings, phases)
        phases.phase(f"churn: {settings.clients} clients", shape.seconds, "s")

        async def watch(elapsed_s: float) -> None:
            phases.advance(min(elapsed_s, shape.seconds))
            await sampler.watch(elapsed_s)

        reports = await launch.closed_loop(NAME, target, settings.clients, shape, watch)
        await sampler.finish()
        return reports, sampler.samples
    finally:
        await connection.close()
