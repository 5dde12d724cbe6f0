"""Throughput: completed (non-error) requests per second of measured interval.

A run's throughput is its completed requests divided by the length of its
measured interval. For intervals, each whole second of the measured interval is
one sample (seconds without a completed request count as zero), which gives the
per-second mean and standard deviation that ``factors`` pools across runs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as sf

from courier.analysis import stats, transforms, trimming


def per_second(trimmed: DataFrame, bounds: Iterable[trimming.Bounds]) -> DataFrame:
    """Completed requests in each whole second of each run's measured interval."""
    bounds = list(bounds)
    keep_from = transforms.bound(bounds, "keep_from_ns")
    seconds = {b.run_id: math.floor(b.measured_s) for b in bounds}
    whole = sf.lit(None).cast("long")
    for run_id, count in seconds.items():
        whole = sf.when(sf.col("run_id") == run_id, sf.lit(count)).otherwise(whole)
    second = sf.floor((sf.col("start_ns") - keep_from) / 1e9)
    completed = trimmed.where(sf.col("outcome") != transforms.ERROR)
    stamped = completed.select("run_id", second.alias("second"), whole.alias("seconds"))
    counts = stamped.where(sf.col("second") < sf.col("seconds")).groupBy("run_id", "second").count()
    return counts.select("run_id", "second", sf.col("count").alias("completed"))


def second_sums(counts: DataFrame) -> DataFrame:
    """Sum and sum of squares of the per-second counts of each run."""
    grouped = counts.groupBy("run_id").agg(
        sf.sum("completed").cast("double").alias("total"),
        sf.sum(sf.col("completed") * sf.col("completed")).cast("double").alias("squares"),
    )
    return grouped.select("run_id", "total", "squares")


def moments(
    rows: Iterable[Mapping[str, Any]], bounds: Mapping[str, trimming.Bounds]
) -> dict[str, stats.Moments]:
    """Per-second throughput moments of each run, zero seconds included."""
    sums = {row["run_id"]: row for row in rows}
    result = {}
    for run_id, run_bounds in bounds.items():
        seconds = math.floor(run_bounds.measured_s)
        if seconds < 1:
            continue
        row = sums.get(run_id, {"total": 0.0, "squares": 0.0})
        mean = row["total"] / seconds
        m2 = max(row["squares"] - seconds * mean**2, 0.0)
        std = math.sqrt(m2 / (seconds - 1)) if seconds > 1 else math.nan
        result[run_id] = stats.Moments(seconds, mean, std)
    return result
