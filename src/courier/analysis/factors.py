"""Each metric against each factor level, pooled over the runs at that level.

Throughput samples are the per-second completed-request counts of the measured
intervals; response-time samples are the individual measured requests. Both are
pooled over every run at the level (over all levels of the other factors), and
the interval is the Student-t 95% interval of the pooled mean.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from courier.analysis import stats, tables
from courier.measurements import manifest as manifest_

COLUMNS = (
    "factor",
    "level",
    "runs",
    "throughput",
    "throughput_ci_low",
    "throughput_ci_high",
    "response_ms",
    "response_ci_low",
    "response_ci_high",
    "p99_ms",
)


def by_level(
    experiment: manifest_.Manifest,
    response: Mapping[str, stats.Moments],
    throughput: Mapping[str, stats.Moments],
    p99: Mapping[str, float],
) -> tables.Table:
    """One row per factor level; p99_ms is the mean of the runs' p99 response times."""
    rows = []
    for factor, levels in experiment.factors.items():
        for level in levels:
            run_ids = [r.run_id for r in experiment.runs if r.levels.get(factor) == level]
            rows.append(_level_row(factor, level, run_ids, response, throughput, p99))
    return tables.from_records(
        "factor_levels", "Metrics against factor levels (95% t intervals)", rows, COLUMNS
    )


def _level_row(
    factor: str,
    level: Any,
    run_ids: list[str],
    response: Mapping[str, stats.Moments],
    throughput: Mapping[str, stats.Moments],
    p99: Mapping[str, float],
) -> dict[str, Any]:
    row: dict[str, Any] = {"factor": factor, "level": str(level), "runs": len(run_ids)}
    for prefix, moments in (("throughput", throughput), ("response", response)):
        pooled = stats.pool(moments[r] for r in run_ids if r in moments)
        mean = pooled.mean if pooled else None
        low, high = stats.t_interval(mean, pooled.std, pooled.n) if pooled else (None, None)
        row["throughput" if prefix == "throughput" else "response_ms"] = mean
        row[f"{prefix}_ci_low"], row[f"{prefix}_ci_high"] = low, high
    p99s = [p99[r] for r in run_ids if p99.get(r) is not None]
    row["p99_ms"] = sum(p99s) / len(p99s) if p99s else None
    return row
