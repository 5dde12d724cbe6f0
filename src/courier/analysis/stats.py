"""Descriptive statistics: aggregated in Spark, finished on the driver.

Spark reduces the records to a few numbers per group (count, mean, standard
deviation, percentiles, second moments); only those small tables reach the driver,
where Student-t intervals and tests are computed with scipy.

Percentiles: ``exact=True`` uses Spark's ``percentile``, which interpolates
linearly between the closest ranks at position ``p * (n - 1)`` (numpy's default
``linear`` method). Otherwise the request summaries read them from histograms with
1% logarithmic buckets (``courier.analysis.histograms``: the order statistic
``ceil(p n)`` to within half a percent, cheap to build and to merge), and ``describe``
uses ``percentile_approx`` with a rank error of at most ``n / accuracy``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as sf
from scipy import stats as sp_stats

from courier.analysis import transforms

PERCENTILES: dict[str, float] = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "p999": 0.999}
CONFIDENCE = 0.95
DEFAULT_ACCURACY = 10_000
"""Rank error at most n / 10,000: a third of the cost of 100,000 on a big run, and
still a hundredth of a percentile."""
SUMMARY_COLUMNS = ("n", "mean", "std", "ci_low", "ci_high", *PERCENTILES)
COUNT_COLUMNS = ("requests", "ok", "misses", "errors")


def percentiles(value: str, exact: bool, accuracy: int = DEFAULT_ACCURACY) -> Column:
    """All of PERCENTILES of ``value`` as one array column."""
    levels = list(PERCENTILES.values())
    if exact:
        return sf.percentile(sf.col(value), sf.array(*[sf.lit(p) for p in levels]))
    return sf.percentile_approx(sf.col(value), levels, accuracy)


def describe_exprs(value: str, exact: bool) -> list[Column]:
    """Aggregate expressions for n, mean, std and the percentile array (nulls skipped)."""
    return [
        sf.count(value).alias("n"),
        sf.avg(value).alias("mean"),
        sf.stddev_samp(value).alias("std"),
        percentiles(value, exact).alias("_percentiles"),
    ]


def count_exprs(outcomes: Sequence[str | int] = transforms.OUTCOMES) -> list[Column]:
    """Aggregate expressions counting requests by outcome; ``outcomes`` are the values
    the ``outcome`` column holds for ok, miss and error (``transforms.OUTCOMES``, or
    their codes)."""
    ok, miss, error = outcomes

    def count_of(outcome: str | int) -> Column:
        return sf.sum(sf.when(sf.col("outcome") == outcome, 1).otherwise(0)).cast("long")

    return [
        sf.count(sf.lit(1)).alias("requests"),
        count_of(ok).alias("ok"),
        count_of(miss).alias("misses"),
        count_of(error).alias("errors"),
    ]


def describe(df: DataFrame, keys: Sequence[str], value: str, *, exact: bool) -> DataFrame:
    """n, mean, std and PERCENTILES of ``value`` per group of ``keys``."""
    grouped = df.groupBy(*keys).agg(*describe_exprs(value, exact))
    return grouped.select(*keys, "n", "mean", "std", *_unpack_percentiles())


def summarize_requests(df: DataFrame, keys: Sequence[str], *, exact: bool) -> DataFrame:
    """Counts by outcome and response-time statistics of classified requests, per group."""
    grouped = df.groupBy(*keys).agg(*count_exprs(), *describe_exprs("latency_ms", exact))
    return grouped.select(*keys, *COUNT_COLUMNS, "n", "mean", "std", *_unpack_percentiles())


def summarize_request_sets(
    df: DataFrame, key_sets: Mapping[str, Sequence[str]], *, exact: bool
) -> DataFrame:
    """``summarize_requests`` for several groupings in one pass (grouping sets).

    The result has every key column of every set (null where a row's set does not
    group by it) and ``grouping_set``, the name of the set a row belongs to.
    """
    keys = list(dict.fromkeys(key for keys in key_sets.values() for key in keys))
    grouped = df.groupingSets([list(k) for k in key_sets.values()], *keys).agg(
        *count_exprs(), *describe_exprs("latency_ms", exact), sf.grouping_id().alias("_id")
    )
    return grouped.select(
        set_names(keys, key_sets).alias("grouping_set"),
        *keys,
        *COUNT_COLUMNS,
        "n",
        "mean",
        "std",
        *_unpack_percentiles(),
    )


def set_names(keys: Sequence[str], key_sets: Mapping[str, Sequence[str]]) -> Column:
    """The name of the grouping set each row of ``groupingSets(..., *keys)`` belongs to;
    needs ``grouping_id()`` as ``_id``."""
    names = sf.lit(None).cast("string")
    for name, set_keys in key_sets.items():
        names = sf.when(sf.col("_id") == grouping_id(keys, set_keys), sf.lit(name)).otherwise(names)
    return names


def grouping_id(keys: Sequence[str], grouped: Sequence[str]) -> int:
    """Spark's grouping_id: one bit per key, first key highest, set when not grouped."""
    return sum(1 << (len(keys) - 1 - i) for i, key in enumerate(keys) if key not in grouped)


def _unpack_percentiles() -> list[Column]:
    return [sf.col("_percentiles")[i].alias(name) for i, name in enumerate(PERCENTILES)]


def t_interval(
    mean: float | None, std: float | None, n: int, confidence: float = CONFIDENCE
) -> tuple[float | None, float | None]:
    """Student-t confidence interval of a mean; (None, None) with fewer than 2 samples."""
    if mean is None or std is None or n < 2 or math.isnan(std):
        return None, None
    half = float(sp_stats.t.ppf((1 + confidence) / 2, n - 1)) * std / math.sqrt(n)
    return float(mean - half), float(mean + half)


def with_confidence(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Adds ``ci_low``/``ci_high`` of the mean to rows holding n, mean and std."""
    finished = []
    for row in rows:
        low, high = t_interval(row["mean"], row["std"], row["n"])
        finished.append({**row, "ci_low": low, "ci_high": high})
    return finished


@dataclass(frozen=True, slots=True)
class Moments:
    """Count, mean and sample standard deviation of one sample."""

    n: int
    mean: float
    std: float

    @property
    def m2(self) -> float:
        """Sum of squared deviations from the mean."""
        return self.std**2 * (self.n - 1) if self.n > 1 else 0.0


def pool(parts: Iterable[Moments]) -> Moments | None:
    """The moments of the union of samples (Chan et al.'s pairwise update)."""
    n, mean, m2 = 0, 0.0, 0.0
    for part in parts:
        if part.n == 0:
            continue
        total = n + part.n
        delta = part.mean - mean
        mean += delta * part.n / total
        m2 += part.m2 + delta**2 * n * part.n / total
        n = total
    if n == 0:
        return None
    return Moments(n, mean, math.sqrt(m2 / (n - 1)) if n > 1 else math.nan)


def regression_exprs(x: str, y: str) -> list[Column]:
    """Aggregates from which ``slope_test`` fits y = a + b x."""
    return [
        sf.count(y).alias("n"),
        sf.avg(x).alias("mean_x"),
        sf.avg(y).alias("mean_y"),
        sf.var_samp(x).alias("var_x"),
        sf.var_samp(y).alias("var_y"),
        sf.covar_samp(x, y).alias("cov_xy"),
    ]


@dataclass(frozen=True, slots=True)
class SlopeTest:
    """Least-squares slope with its t-test against zero and confidence interval."""

    n: int
    slope: float
    intercept: float
    std_error: float
    t: float
    p_value: float
    ci_low: float
    ci_high: float

    @property
    def significant(self) -> bool:
        return self.p_value < 1 - CONFIDENCE


def slope_test(row: Mapping[str, Any], confidence: float = CONFIDENCE) -> SlopeTest | None:
    """Test the slope from ``regression_exprs`` aggregates; None if it is undetermined."""
    n = int(row["n"])
    var_x = row["var_x"]
    if n < 3 or var_x is None or var_x <= 0:
        return None
    slope = row["cov_xy"] / var_x
    residual = max((n - 1) * (row["var_y"] - slope * row["cov_xy"]), 0.0) / (n - 2)
    std_error = math.sqrt(residual / ((n - 1) * var_x))
    if std_error == 0:
        t = 0.0 if slope == 0 else math.copysign(math.inf, slope)
    else:
        t = slope / std_error
    p_value = float(2 * sp_stats.t.sf(abs(t), n - 2))
    half = float(sp_stats.t.ppf((1 + confidence) / 2, n - 2)) * std_error
    intercept = row["mean_y"] - slope * row["mean_x"]
    return SlopeTest(n, slope, intercept, std_error, t, p_value, slope - half, slope + half)
