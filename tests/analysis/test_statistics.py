"""Statistics computed by the pipeline agree with numpy/scipy on generated samples."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pyspark.sql import DataFrame, SparkSession
from scipy import stats as sp_stats

from courier.analysis import stats

RELATIVE = 1e-9
PERCENTILE_LEVELS = {"p50": 50, "p90": 90, "p99": 99, "p999": 99.9}


@pytest.fixture(scope="module")
def samples() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(20251122)
    return {
        "a": rng.lognormal(0.0, 0.8, 4_000),
        "b": rng.exponential(3.0, 1_537),
        "c": rng.normal(10.0, 2.0, 2),
    }


@pytest.fixture(scope="module")
def frame(spark: SparkSession, samples: dict[str, np.ndarray]) -> DataFrame:
    rows = [(group, float(v)) for group, values in samples.items() for v in values]
    return spark.createDataFrame(rows, "group string, value double")


def test_exact_description_matches_numpy(frame: DataFrame, samples: dict[str, np.ndarray]) -> None:
    described = {
        row["group"]: row
        for row in frame.transform(stats.describe, ["group"], "value", exact=True).collect()
    }
    assert set(described) == set(samples)
    for group, values in samples.items():
        row = described[group]
        assert row["n"] == len(values)
        assert row["mean"] == pytest.approx(np.mean(values), rel=RELATIVE)
        assert row["std"] == pytest.approx(np.std(values, ddof=1), rel=RELATIVE)
        for name, q in PERCENTILE_LEVELS.items():
            expected = np.percentile(values, q, method="linear")
            assert row[name] == pytest.approx(expected, rel=RELATIVE), (group, name)


def test_confidence_interval_matches_scipy_t(samples: dict[str, np.ndarray]) -> None:
    for values in samples.values():
        mean, std, n = float(np.mean(values)), float(np.std(values, ddof=1)), len(values)
        low, high = stats.t_interval(mean, std, n)
        expected = sp_stats.t.interval(0.95, n - 1, loc=mean, scale=sp_stats.sem(values))
        assert (low, high) == pytest.approx(expected, rel=RELATIVE)


def test_confidence_interval_needs_two_samples() -> None:
    assert stats.t_interval(1.0, math.nan, 1) == (None, None)
    assert stats.t_interval(None, None, 0) == (None, None)


def test_approximate_percentiles_are_observed_values_near_the_rank(
    frame: DataFrame, samples: dict[str, np.ndarray]
) -> None:
    described = frame.transform(stats.describe, ["group"], "value", exact=False).collect()
    for row in described:
        ordered = np.sort(samples[row["group"]])
        for name, q in PERCENTILE_LEVELS.items():
            rank = int(np.searchsorted(ordered, row[name]))
            assert ordered[rank] == row[name]
            target = q / 100 * len(ordered)
            assert abs(rank - target) <= 1 + len(ordered) / stats.DEFAULT_ACCURACY


def test_request_summary_counts_outcomes_and_keeps_errors_out_of_latency(
    spark: SparkSession,
) -> None:
    rng = np.random.default_rng(7)
    latencies = rng.gamma(2.0, 1.5, 600)
    outcomes = np.array(["ok", "miss", "error"])[rng.integers(0, 3, 600)]
    rows = [
        ("r1", str(o), None if o == "error" else float(v))
        for o, v in zip(outcomes, latencies, strict=True)
    ]
    df = spark.createDataFrame(rows, "run_id string, outcome string, latency_ms double")
    row = df.transform(stats.summarize_requests, ["run_id"], exact=True).collect()[0]
    measured = latencies[outcomes != "error"]
    assert (row["requests"], row["ok"], row["misses"], row["errors"]) == (
        600,
        int((outcomes == "ok").sum()),
        int((outcomes == "miss").sum()),
        int((outcomes == "error").sum()),
    )
    assert row["n"] == len(measured)
    assert row["mean"] == pytest.approx(measured.mean(), rel=RELATIVE)
    assert row["p99"] == pytest.approx(np.percentile(measured, 99), rel=RELATIVE)


def test_pooled_moments_equal_the_concatenated_sample(samples: dict[str, np.ndarray]) -> None:
    parts = [
        stats.Moments(len(v), float(np.mean(v)), float(np.std(v, ddof=1))) for v in samples.values()
    ]
    pooled = stats.pool(parts)
    everything = np.concatenate(list(samples.values()))
    assert pooled is not None
    assert pooled.n == len(everything)
    assert pooled.mean == pytest.approx(everything.mean(), rel=RELATIVE)
    assert pooled.std == pytest.approx(everything.std(ddof=1), rel=RELATIVE)


def test_slope_test_matches_scipy_linregress(spark: SparkSession) -> None:
    rng = np.random.default_rng(3)
    x = np.arange(60, dtype=float)
    y = 40 + 0.05 * x + rng.normal(0, 2.0, len(x))
    df = spark.createDataFrame(
        [(float(a), float(b)) for a, b in zip(x, y, strict=True)], "x double, y double"
    )
    aggregates = df.agg(*stats.regression_exprs("x", "y")).collect()[0].asDict()
    result = stats.slope_test(aggregates)
    reference = sp_stats.linregress(x, y)
    assert result is not None
    assert result.slope == pytest.approx(reference.slope, rel=RELATIVE)
    assert result.intercept == pytest.approx(reference.intercept, rel=RELATIVE)
    assert result.std_error == pytest.approx(reference.stderr, rel=1e-8)
    assert result.p_value == pytest.approx(reference.pvalue, rel=1e-6)
    half = sp_stats.t.ppf(0.975, len(x) - 2) * reference.stderr
    assert (result.ci_low, result.ci_high) == pytest.approx(
        (reference.slope - half, reference.slope + half), rel=1e-8
    )
    assert result.significant == (reference.pvalue < 0.05)


def test_slope_test_is_undetermined_without_spread_in_time() -> None:
    row = {"n": 5, "mean_x": 1.0, "mean_y": 3.0, "var_x": 0.0, "var_y": 1.0, "cov_xy": 0.0}
    assert stats.slope_test(row) is None
