"""Time traces: per-window throughput, response time, CPU, RSS, GC and queue depth.

Traces span each whole run, warm-up and cool-down included, so the report can
show where the measured interval was cut. Window ``w`` covers seconds
``[w * window_s, (w + 1) * window_s)`` after the run's start; a last, shorter
window is divided by its true length. Records outside the run's extent (before
its start or after its end) are left out of the traces.

The request trace counts requests per run, window and 1% bucket of response time
(``courier.analysis.histograms``), a grouping set of ``request_counts``: each
window's mean comes from its exact sum of nanoseconds, its p99 is read off its
buckets (the order statistic ``ceil(0.99 n)`` to within half a percent), as for the
response-time summaries.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from courier.analysis import histograms, tables, transforms, trimming

TRACE_PERCENTILE = 0.99


def finish_requests(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Completed requests, errors, mean and p99 response time (ms) per run and window,
    from rows per run, window and response-time bucket (``request_counts``): ``requests``
    counts them all, ``n`` and ``total_ns`` the completed ones (errors are in the row
    whose bucket is null)."""
    cells: dict[tuple[str, int], list[Mapping[str, Any]]] = {}
    for row in rows:
        cells.setdefault((row["run_id"], row["window"]), []).append(row)
    finished = []
    for (run_id, window), group in cells.items():
        timed = [c for c in group if c["bucket"] is not None]
        completed = sum(int(c["n"]) for c in timed)
        found: dict[str, Any] = {
            "run_id": run_id,
            "window": window,
            "completed": completed,
            "errors": sum(int(c["requests"]) - int(c["n"]) for c in group),
            "mean_ms": None,
            "p99_ms": None,
        }
        if completed:
            total = sum(int(c["total_ns"]) for c in timed)
            found["mean_ms"] = total / completed / transforms.NS_PER_MS
            found["p99_ms"] = histograms.Histogram.of(
                {**c, "squares_ns": 0} for c in timed
            ).percentile(TRACE_PERCENTILE)
        finished.append(found)
    return finished


@dataclass(frozen=True)
class Traces:
    """The collected per-window tables of every run."""

    window_s: float
    requests: tables.Table
    resources: tables.Table
    gc: tables.Table
    depth: tables.Table

    def all(self) -> list[tables.Table]:
        return [self.requests, self.resources, self.gc, self.depth]


def with_throughput(
    rows: Iterable[dict[str, Any]], bounds: dict[str, trimming.Bounds], window_s: float
) -> list[dict[str, Any]]:
    """Adds each window's throughput (completed requests per second); rows need ``t_s``."""
    finished = []
    for row in rows:
        length = min(window_s, bounds[row["run_id"]].duration_s - row["t_s"])
        finished.append({**row, "throughput": row["completed"] / length})
    return finished


def with_start(
    rows: Iterable[dict[str, Any]], bounds: dict[str, trimming.Bounds], window_s: float
) -> list[dict[str, Any]]:
    """Adds each window's start in seconds since the run's start."""
    finished = [
        {**row, "t_s": row["window"] * window_s}
        for row in rows
        if 0 <= row["window"] * window_s < bounds[row["run_id"]].duration_s
    ]
    return sorted(finished, key=lambda r: (r["run_id"], r.get("process", ""), r["window"]))
