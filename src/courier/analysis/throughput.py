"""Throughput: completed (non-error) requests per second of measured interval.

A run's throughput is its completed requests divided by the length of its
measured interval. For intervals, each whole second of the measured interval is
one sample (seconds without a completed request count as zero), which gives the
per-second mean and standard deviation that ``factors`` pools across runs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as sf

from courier.analysis import stats, transforms, trimming


def second(bounds: Sequence[trimming.Bounds], error: str | int = transforms.ERROR) -> Column:
    """The whole second of its run's measured interval a completed request started in;
    null for errors, for requests outside the interval and in its last, partial second.
    Reads the run's bounds by the ``run`` index of ``transforms.with_run``; ``error`` is
    what the ``outcome`` column holds for an error (or its code)."""
    keep_from = transforms.of_run([b.keep_from_ns for b in bounds])
    keep_until = transforms.of_run([b.keep_until_ns for b in bounds])
    whole = transforms.of_run([math.floor(b.measured_s) for b in bounds])
    at = sf.col("start_ns")
    index = sf.floor((at - keep_from) / 1e9)
    counted = ((sf.col("outcome") != error) & (at >= keep_from) & (at < keep_until)) & (
        index < whole
    )
    return sf.when(counted, index)


def second_sums(counts: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Sum and sum of squares of the per-second counts (``run_id``, ``completed``) of
    each run."""
    sums: dict[str, dict[str, Any]] = {}
    for row in counts:
        cell = sums.setdefault(row["run_id"], {"run_id": row["run_id"], "total": 0, "squares": 0})
        cell["total"] += int(row["completed"])
        cell["squares"] += int(row["completed"]) ** 2
    return [{**cell, "total": float(cell["total"]), "squares": float(cell["squares"])}
            for cell in sums.values()]  # fmt: skip


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
