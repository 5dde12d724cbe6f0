"""What a benchmark measured: per system and level, throughput and latency percentiles.

An *operation* is one request, a send or a pop; a *cycle* is one send followed by
one pop. Latencies arrive as raw nanosecond arrays from the client processes and
are summarised here with numpy (linear interpolation between closest ranks, the
same definition as ``statistics.quantiles(method="inclusive")``).

    >>> percentiles(numpy.array([1_000_000, 2_000_000, 3_000_000, 4_000_000]))
    Latency(p50_ms=2.5, p90_ms=3.7, p99_ms=3.97)
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy
import numpy.typing

from courier.lab import host

NS_PER_MS = 1_000_000
QUANTILES = (50, 90, 99)
PACKAGES = ("aio-pika", "numpy")
"""Versions recorded with the results beyond those the lab records."""

LatencyArray = numpy.typing.NDArray[numpy.int64]
IntervalArray = numpy.typing.NDArray[numpy.int32]


@dataclass(frozen=True, slots=True)
class Latency:
    """Latency percentiles in milliseconds."""

    p50_ms: float
    p90_ms: float
    p99_ms: float

    def as_json(self) -> dict[str, float]:
        return dataclasses.asdict(self)


def latency_json(latency: Latency | None) -> dict[str, float] | None:
    return None if latency is None else latency.as_json()


def percentiles(latencies_ns: LatencyArray) -> Latency | None:
    """p50, p90 and p99 of the latencies (ns in, ms out); None when there are none."""
    if latencies_ns.size == 0:
        return None
    values = numpy.percentile(latencies_ns, QUANTILES) / NS_PER_MS
    return Latency(*(round(float(value), 6) for value in values))


def _no_intervals() -> IntervalArray:
    return numpy.zeros(0, dtype=numpy.int32)


@dataclass(frozen=True, slots=True)
class ClientsReport:
    """What one client process measured in the measured window (picklable).

    ``send_interval[k]`` is the interval ``send_ns[k]`` completed in (likewise for
    pops); empty when the run was not cut into intervals."""

    process: str
    send_ns: LatencyArray
    pop_ns: LatencyArray
    empty_pops: int = 0
    errors: int = 0
    last_error: str = ""
    sent_messages: int = 0
    popped_messages: int = 0
    send_interval: IntervalArray = field(default_factory=_no_intervals)
    pop_interval: IntervalArray = field(default_factory=_no_intervals)


@dataclass(frozen=True, slots=True)
class LevelResult:
    """One system at one number of clients."""

    system: str
    clients: int
    duration_s: float
    sends: int
    pops: int
    empty_pops: int
    errors: int
    latency: Latency | None
    send_latency: Latency | None
    pop_latency: Latency | None
    last_error: str = ""
    sent_messages: int = 0
    popped_messages: int = 0
    batch: int = 1  # messages per send and per pop asked for
    round: int = 1  # which of the run's rounds (``--rounds``) measured it

    @property
    def operations(self) -> int:
        return self.sends + self.pops

    @property
    def messages_per_s(self) -> float:
        """Messages sent plus messages popped, per second: ops/s counted per message,
        so a batch of 100 counts 100 (without batches, equal to ops/s)."""
        return (self.sent_messages + self.popped_messages) / self.duration_s

    @property
    def delivered_per_s(self) -> float:
        """Messages popped per second: each one went through the whole system."""
        return self.popped_messages / self.duration_s

    @property
    def throughput(self) -> float:
        """What the ratios compare: ops/s, or with batches messages/s."""
        return self.messages_per_s if self.batch > 1 else self.ops_per_s

    @property
    def ops_per_s(self) -> float:
        return self.operations / self.duration_s

    @property
    def cycles_per_s(self) -> float:
        # Every client pops right after its send, so each pop completes one cycle.
        return self.pops / self.duration_s

    def as_json(self) -> dict[str, Any]:
        document = dataclasses.asdict(self)
        document.update(
            operations=self.operations, ops_per_s=self.ops_per_s, cycles_per_s=self.cycles_per_s,
            messages_per_s=self.messages_per_s, delivered_per_s=self.delivered_per_s,
        )  # fmt: skip
        return document


def combine(
    system: str,
    clients: int,
    duration_s: float,
    reports: Sequence[ClientsReport],
    batch: int = 1,
    round_number: int = 1,
) -> LevelResult:
    """One level's result from the reports of all its client processes."""
    sends = numpy.concatenate([report.send_ns for report in reports] or [no_latencies()])
    pops = numpy.concatenate([report.pop_ns for report in reports] or [no_latencies()])
    last_errors = [report.last_error for report in reports if report.last_error]
    return LevelResult(
        system=system,
        clients=clients,
        duration_s=duration_s,
        sends=int(sends.size),
        pops=int(pops.size),
        empty_pops=sum(report.empty_pops for report in reports),
        errors=sum(report.errors for report in reports),
        latency=percentiles(numpy.concatenate([sends, pops])),
        send_latency=percentiles(sends),
        pop_latency=percentiles(pops),
        last_error=last_errors[-1] if last_errors else "",
        sent_messages=sum(report.sent_messages for report in reports),
        popped_messages=sum(report.popped_messages for report in reports),
        batch=batch,
        round=round_number,
    )


def no_latencies() -> LatencyArray:
    return numpy.zeros(0, dtype=numpy.int64)


@dataclass(frozen=True, slots=True)
class Ratio:
    """Courier (through the middleware) against one peer at one level.

    ``ops`` above 1 means Courier did more operations per second (with batches: more
    messages per second); ``p99`` above 1
    means Courier's 99th percentile was slower. None when the peer's figure is zero
    or missing.
    """

    clients: int
    peer: str
    ops: float | None
    p99: float | None
    round: int = 1


@dataclass(frozen=True, slots=True)
class RatioSpread:
    """One peer's ratios at one level over the rounds: the median and the extremes
    (None where no round had the ratio)."""

    clients: int
    peer: str
    rounds: int  # rounds that had an ops ratio
    ops_median: float | None
    ops_min: float | None
    ops_max: float | None
    p99_median: float | None
    p99_min: float | None
    p99_max: float | None


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or denominator == 0:
        return None
    if math.isnan(numerator) or math.isnan(denominator):
        return None
    return numerator / denominator


def ratios(results: Sequence[LevelResult], reference: str = "courier") -> list[Ratio]:
    """The reference system against every other system, level by level and round by
    round (each system is compared with the reference's run of the same round)."""
    by_level = {(result.system, result.clients, result.round): result for result in results}
    found = []
    for result in results:
        ours = by_level.get((reference, result.clients, result.round))
        if result.system == reference or ours is None:
            continue
        found.append(
            Ratio(
                clients=result.clients,
                peer=result.system,
                ops=ratio(ours.throughput, result.throughput),
                p99=ratio(_p99(ours), _p99(result)),
                round=result.round,
            )
        )
    return found


def spreads(found: Sequence[Ratio]) -> list[RatioSpread]:
    """Per level and peer, the median, smallest and largest ratio over the rounds."""
    grouped: dict[tuple[int, str], list[Ratio]] = {}
    for each in found:
        grouped.setdefault((each.clients, each.peer), []).append(each)
    spread = []
    for (clients, peer), rounds in sorted(grouped.items()):
        ops = [each.ops for each in rounds if each.ops is not None]
        p99 = [each.p99 for each in rounds if each.p99 is not None]
        spread.append(RatioSpread(clients, peer, len(ops), *_median_min_max(ops),
                                  *_median_min_max(p99)))  # fmt: skip
    return spread


def _median_min_max(values: Sequence[float]) -> tuple[float | None, float | None, float | None]:
    if not values:
        return None, None, None
    return statistics.median(values), min(values), max(values)


def _p99(result: LevelResult) -> float | None:
    return result.latency.p99_ms if result.latency is not None else None


def document(
    spec: dict[str, Any],
    results: Sequence[LevelResult],
    skipped: dict[str, str],
    environment: dict[str, Any],
) -> dict[str, Any]:
    """The whole run as JSON-ready data (the format docs/performance.md describes)."""
    compared = ratios(results)
    return {
        "benchmark": "peers",
        "spec": spec,
        "environment": environment,
        "skipped": skipped,
        "results": [result.as_json() for result in results],
        "ratios": [dataclasses.asdict(found) for found in compared],
        "ratio_spreads": [dataclasses.asdict(found) for found in spreads(compared)],
    }


@dataclass(frozen=True, slots=True)
class Pace:
    """``host.pace_ms`` at a run's start and end: how fast the machine ran Python."""

    start_ms: float
    end_ms: float

    @classmethod
    def since(cls, start_ms: float) -> Pace:
        """The run that began at pace ``start_ms`` ends now: probe again."""
        return cls(start_ms, host.pace_ms())

    def describe(self) -> str:
        return (
            f"pace: a loop of a million Python additions took {self.start_ms:g} ms of CPU"
            f" at the start and {self.end_ms:g} ms at the end (lower is faster)"
        )


def environment(servers: dict[str, str], pace: Pace | None = None) -> dict[str, Any]:
    """What a run ran on: Courier's revision, package versions, the machine, servers,
    and, when measured, the machine's pace during the run."""
    found: dict[str, Any] = {
        "git_revision": host.git_revision(),
        "packages": {**host.packages(), **_versions(PACKAGES)},
        "machine": host.machine(),
        "servers": servers,
    }
    if pace is not None:
        found["pace_ms"] = {"start": pace.start_ms, "end": pace.end_ms}
    return found


def _versions(names: Sequence[str]) -> dict[str, str]:
    found = {}
    for name in names:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            found[name] = importlib.metadata.version(name)
    return found
