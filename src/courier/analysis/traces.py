"""Time traces: per-window throughput, response time, CPU, RSS, GC and queue depth.

Traces span each whole run, warm-up and cool-down included, so the report can
show where the measured interval was cut. Window ``w`` covers seconds
``[w * window_s, (w + 1) * window_s)`` after the run's start; a last, shorter
window is divided by its true length. Records outside the run's extent (before
its start or after its end) are left out of the traces.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as sf

from courier.analysis import tables, transforms, trimming

TRACE_ACCURACY = 10_000


def requests_per_window(windowed: DataFrame) -> DataFrame:
    """Completed requests, errors, mean and p99 response time per run and window."""
    measured = sf.col("outcome") != transforms.ERROR
    grouped = windowed.groupBy("run_id", "window").agg(
        sf.sum(sf.when(measured, 1).otherwise(0)).cast("long").alias("completed"),
        sf.sum(sf.when(measured, 0).otherwise(1)).cast("long").alias("errors"),
        sf.avg("latency_ms").alias("mean_ms"),
        sf.percentile_approx("latency_ms", 0.99, TRACE_ACCURACY).alias("p99_ms"),
    )
    return grouped.select("run_id", "window", "completed", "errors", "mean_ms", "p99_ms")


def resources_per_window(windowed: DataFrame) -> DataFrame:
    """Mean CPU and peak RSS of each process per run and window."""
    grouped = windowed.groupBy("run_id", "process", "tier", "window").agg(
        sf.avg("cpu_percent").alias("cpu_percent"),
        (sf.max("rss_bytes") / 2**20).alias("rss_mib"),
    )
    return grouped.select("run_id", "process", "tier", "window", "cpu_percent", "rss_mib")


def gc_per_window(windowed: DataFrame) -> DataFrame:
    """Number, total and longest GC pause of each process per run and window."""
    grouped = windowed.groupBy("run_id", "process", "window").agg(
        sf.count(sf.lit(1)).alias("pauses"),
        (sf.sum("duration_ns") / transforms.NS_PER_MS).alias("pause_ms"),
        (sf.max("duration_ns") / transforms.NS_PER_MS).alias("max_pause_ms"),
    )
    return grouped.select("run_id", "process", "window", "pauses", "pause_ms", "max_pause_ms")


def depth_per_window(windowed: DataFrame) -> DataFrame:
    """Mean total queue depth per run and window."""
    grouped = windowed.groupBy("run_id", "window").agg(sf.avg("messages").alias("messages"))
    return grouped.select("run_id", "window", "messages")


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
