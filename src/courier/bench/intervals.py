"""A long run cut into intervals: throughput and latency of each, from tagged samples.

The client processes tag every kept latency with the interval it completed in,
counted from the start of the measured window (``loop.Window.interval``): with
60-second intervals, a request completing 59.9 s in belongs to interval 0, one
completing at 60.0 s to interval 1. When the measured window is not a whole number
of intervals, the last one is shorter, and its rates are over its own length.

    >>> bounds(150.0, 60.0)
    [(0.0, 60.0), (60.0, 120.0), (120.0, 150.0)]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy

from courier.bench import results


def bounds(duration_s: float, interval_s: float) -> list[tuple[float, float]]:
    """Each interval's (start, end) in seconds from the start of the measured window."""
    # A hair of tolerance: 600 / 60 must be 10 intervals, not 11 after rounding.
    count = max(1, math.ceil(duration_s / interval_s - 1e-9))
    return [(n * interval_s, min((n + 1) * interval_s, duration_s)) for n in range(count)]


def split(
    latencies_ns: results.LatencyArray, interval_of: results.IntervalArray, count: int
) -> list[results.LatencyArray]:
    """The latencies of intervals 0 .. count-1; a sample tagged otherwise is dropped."""
    return [latencies_ns[interval_of == n] for n in range(count)]


@dataclass(frozen=True, slots=True)
class Interval:
    """The requests that completed in one interval."""

    index: int
    start_s: float
    end_s: float
    sends: int
    pops: int
    latency: results.Latency | None  # sends and pops together
    send_latency: results.Latency | None
    pop_latency: results.Latency | None

    @property
    def seconds(self) -> float:
        return self.end_s - self.start_s

    @property
    def operations(self) -> int:
        return self.sends + self.pops

    @property
    def ops_per_s(self) -> float:
        return self.operations / self.seconds

    @property
    def cycles_per_s(self) -> float:
        return self.pops / self.seconds


def combine(
    reports: Sequence[results.ClientsReport], duration_s: float, interval_s: float
) -> list[Interval]:
    """Every interval's figures, from the reports of all client processes."""
    spans = bounds(duration_s, interval_s)
    sends = _joined(reports, len(spans), send=True)
    pops = _joined(reports, len(spans), send=False)
    return [
        Interval(
            index=n, start_s=start, end_s=end, sends=int(sends[n].size), pops=int(pops[n].size),
            latency=results.percentiles(numpy.concatenate([sends[n], pops[n]])),
            send_latency=results.percentiles(sends[n]),
            pop_latency=results.percentiles(pops[n]),
        )
        for n, (start, end) in enumerate(spans)
    ]  # fmt: skip


def _joined(
    reports: Sequence[results.ClientsReport], count: int, *, send: bool
) -> list[results.LatencyArray]:
    per_report = [
        split(r.send_ns, r.send_interval, count) if send else split(r.pop_ns, r.pop_interval, count)
        for r in reports
    ]
    return [
        numpy.concatenate([each[n] for each in per_report] or [results.no_latencies()])
        for n in range(count)
    ]
