"""Histograms with logarithmic buckets: percentiles with intervals, in one pass.

A duration in ms falls in bucket ``floor(log(ms / MIN_MS) / log(1 + RELATIVE_ERROR))``:
each bucket spans values within a factor 1.01 and stands for its geometric middle,
so a percentile read from the buckets is within half a percent of the order
statistic it stands for. Spark counts each group's values per bucket (with exact
sums of the nanoseconds and of their squares, for the moments) in one hash
aggregation whose output is a few hundred rows per group; histograms of several
groups merge by adding their rows, e.g. the runs of one factor level.

The pth percentile is the order statistic ``ceil(p n)``; its 95% interval the
distribution-free one from order statistics, ranks ``binom.ppf(0.025; n, p)`` and
``binom.ppf(0.975; n, p) + 1``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from pyspark.sql import Column
from pyspark.sql import functions as sf
from scipy import stats as sp_stats

from courier.analysis import stats, transforms

RELATIVE_ERROR = 0.01
"""Bucket width: a bucket spans values within a factor 1 + RELATIVE_ERROR."""
MIN_MS = 1e-3
EXACT = "decimal(38,0)"
"""Sums of squared nanoseconds, exact: the figures do not depend on the order in
which Spark merges partial sums (local mode and a cluster agree)."""


def bucket(value: Column) -> Column:
    """The logarithmic bucket of a (non-negative) duration in ms."""
    clipped = sf.greatest(value, sf.lit(MIN_MS))
    return sf.floor(sf.log(clipped / MIN_MS) / math.log1p(RELATIVE_ERROR)).cast("int")


def bucket_value(index: np.ndarray) -> np.ndarray:
    """A bucket's representative value: its geometric middle."""
    return MIN_MS * (1 + RELATIVE_ERROR) ** (np.asarray(index, dtype=float) + 0.5)


def sums(ns: Column, *, exact: bool = True) -> list[Column]:
    """Aggregates ``total_ns`` and ``squares_ns`` of a duration in ns (nulls skipped).

    ``total_ns`` is always exact (a long); ``squares_ns`` too when ``exact``, at twice
    the cost of a double sum, whose last bits depend on the order in which Spark
    merges partial sums.
    """
    if exact:
        wide = ns.cast(EXACT)
        return [sf.sum(ns).alias("total_ns"), sf.sum(wide * wide).alias("squares_ns")]
    real = ns.cast("double")
    return [sf.sum(ns).alias("total_ns"), sf.sum(real * real).alias("squares_ns")]


def grouping_names(keys: Sequence[str], key_sets: Mapping[str, Sequence[str]]) -> Column:
    """The name of the grouping set each row of ``groupingSets(..., *keys, "bucket")``
    belongs to (every set is grouped by bucket too); needs ``grouping_id()`` as ``_id``."""
    with_bucket = {name: [*set_keys, "bucket"] for name, set_keys in key_sets.items()}
    return stats.set_names([*keys, "bucket"], with_bucket)


def latency_ns(error: str | int = transforms.ERROR) -> Column:
    """A classified request's response time in ns; null for errors, which have none.
    ``error`` is what the ``outcome`` column holds for one (or its code)."""
    return sf.when(sf.col("outcome") != error, sf.col("response_ns"))


def bucket_ns(ns: Column) -> Column:
    """The logarithmic bucket of a duration in ns (null stays null)."""
    return sf.when(ns.isNotNull(), bucket(ns / transforms.NS_PER_MS))


@dataclass(frozen=True)
class Histogram:
    """Durations of one group: bucket counts, and exact sums in ns."""

    buckets: np.ndarray
    counts: np.ndarray
    total_ns: int
    squares_ns: int
    on_time: int

    @property
    def n(self) -> int:
        return int(self.counts.sum())

    @classmethod
    def of(cls, rows: Iterable[Mapping[str, Any]]) -> Histogram:
        """From rows with bucket, n, total_ns, squares_ns and (optionally) on_time;
        buckets may repeat (the histograms of several groups): they are merged."""
        counts: dict[int, int] = {}
        total = squares = on_time = 0
        for row in rows:
            counts[int(row["bucket"])] = counts.get(int(row["bucket"]), 0) + int(row["n"])
            total += int(row["total_ns"])
            squares += round(row["squares_ns"])  # a Decimal, or a double when not exact
            on_time += int(row.get("on_time") or 0)
        ordered = sorted(counts.items())
        return cls(
            np.array([b for b, _ in ordered], dtype=np.int64),
            np.array([c for _, c in ordered], dtype=np.int64),
            total,
            squares,
            on_time,
        )

    def moments(self) -> stats.Moments | None:
        """Mean and sample standard deviation in ms, from the exact sums."""
        n = self.n
        if n == 0:
            return None
        mean = Fraction(self.total_ns, n)
        m2 = self.squares_ns - mean * self.total_ns  # sum of squared deviations, exact
        std = math.sqrt(m2 / (n - 1)) / transforms.NS_PER_MS if n > 1 else 0.0
        return stats.Moments(n, float(mean) / transforms.NS_PER_MS, std)

    def percentile(self, p: float) -> float:
        """The p-quantile alone (order statistic ceil(p n)), without its interval."""
        rank = max(math.ceil(p * self.n), 1)
        index = np.searchsorted(np.cumsum(self.counts), rank, side="left")
        return float(bucket_value(self.buckets[index]))

    def quantile(self, p: float, confidence: float = stats.CONFIDENCE) -> tuple[float, ...]:
        """The p-quantile (order statistic ceil(p n)) and its distribution-free interval."""
        n = self.n
        alpha = 1 - confidence
        low = max(int(sp_stats.binom.ppf(alpha / 2, n, p)), 1)
        high = min(int(sp_stats.binom.ppf(1 - alpha / 2, n, p)) + 1, n)
        ranks = np.array([max(math.ceil(p * n), 1), low, high])
        cumulative = np.cumsum(self.counts)
        index = np.searchsorted(cumulative, ranks, side="left")
        return tuple(float(v) for v in bucket_value(self.buckets[index]))
