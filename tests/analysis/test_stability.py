"""The backlog trend test, against scipy's regression on the same depths."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from pyspark.sql import SparkSession
from scipy import stats as sp_stats

from courier.analysis import stability, stats, tables


def aggregates(spark: SparkSession, depths: np.ndarray) -> dict[str, Any]:
    """The regression aggregates of depth on time, computed by Spark as the pipeline does."""
    rows = [(float(t), int(d)) for t, d in enumerate(depths)]
    frame = spark.createDataFrame(rows, "t_s double, messages long")
    return tables.collect(frame.agg(*stats.regression_exprs("t_s", "messages")))[0]


def depths(slope: float, seed: int, seconds: int = 40, noise: float = 3.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    level = 20 + slope * np.arange(seconds) + rng.normal(0, noise, seconds)
    return np.maximum(np.round(level), 0)


@pytest.mark.parametrize(("slope", "seed"), [(0.0, 1), (0.05, 2), (0.8, 3), (-0.3, 4)])
def test_slope_interval_and_one_sided_p_match_scipy(
    spark: SparkSession, slope: float, seed: int
) -> None:
    observed = depths(slope, seed)
    trend = stability.trend(aggregates(spark, observed), measured_s=40.0, arrivals_per_s=0.0)
    assert trend is not None
    reference = sp_stats.linregress(np.arange(40), observed, alternative="greater")
    half = sp_stats.t.ppf(0.975, 38) * reference.stderr
    assert trend.slope == pytest.approx(reference.slope, rel=1e-9, abs=1e-12)
    assert trend.p_growing == pytest.approx(reference.pvalue, rel=1e-6)
    assert (trend.ci_low, trend.ci_high) == pytest.approx(
        (reference.slope - half, reference.slope + half), rel=1e-9
    )
    assert trend.growth == pytest.approx(reference.slope * 40.0)


def test_a_growing_backlog_is_unstable_and_a_wandering_one_stable(spark: SparkSession) -> None:
    growing = stability.trend(aggregates(spark, depths(2.0, 5)), 40.0, arrivals_per_s=5.0)
    flat = stability.trend(aggregates(spark, depths(0.0, 6)), 40.0, arrivals_per_s=5.0)
    assert growing is not None and not growing.stable
    assert flat is not None and flat.stable


def test_a_small_significant_slope_is_not_material(spark: SparkSession) -> None:
    # +0.15 messages/s with little noise is significant, but 6 messages over 40 s
    # is less than MIN_GROWTH: a backlog that small is not called growing.
    trend = stability.trend(aggregates(spark, depths(0.15, 7, noise=0.3)), 40.0, 0.0)
    assert trend is not None
    assert trend.p_growing < 0.05 and trend.growth < stability.MIN_GROWTH
    assert trend.stable


def test_the_material_growth_is_a_second_of_arrivals_on_a_busy_queue(
    spark: SparkSession,
) -> None:
    trend = stability.trend(aggregates(spark, depths(1.0, 8)), 40.0, arrivals_per_s=200.0)
    assert trend is not None and trend.material == 200.0
    assert trend.p_growing < 0.05 and trend.stable  # +40 in 40 s at 200 messages/s


def test_too_few_samples_decide_nothing(spark: SparkSession) -> None:
    assert stability.trend(aggregates(spark, np.array([3.0, 4.0])), 2.0, 0.0) is None
