"""`courier analyze --compare A B`: the difference per configuration and its significance."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession
from scipy import stats as sp_stats

from courier.analysis import comparison, pipeline, synthetic
from courier.cli.analyze import analyze
from courier.measurements import manifest, record_schema

FACTORS = {"clients": [1, 8]}


def measured_latencies(root: Path, config_level: int) -> np.ndarray:
    """Response times (ms) of the measured non-error requests of one configuration."""
    loaded = manifest.load(root)
    values = []
    for run in loaded.runs:
        if run.levels["clients"] != config_level:
            continue
        assert run.start_ns is not None and run.end_ns is not None
        table = pq.read_table(root / run.run_id / record_schema.CLIENT_REQUESTS)
        start = table.column("start_ns")
        keep = pc.and_(
            pc.greater_equal(start, run.start_ns + int(run.warmup_s * 1e9)),
            pc.less(start, run.end_ns - int(run.cooldown_s * 1e9)),
        )
        kept = table.filter(pc.and_(keep, pc.invert(pc.equal(table["status"], "QUEUE_NOT_FOUND"))))
        values.append(kept.column("response_ns").to_numpy() / 1e6)
    return np.concatenate(values)


def test_b_against_a_per_configuration(spark: SparkSession, tmp_path: Path) -> None:
    # B is A's design with a steeper latency step: clients=8 is slower in B, clients=1
    # (scale 1 in both) is not.
    shape = {"factors": FACTORS, "replications": 2, "requests_per_run": 3_000}
    first = synthetic.write_experiment(tmp_path / "a", seed=1, **shape)
    second = synthetic.write_experiment(tmp_path / "b", seed=2, latency_step=2.0, **shape)
    a, b = (pipeline.run(path, spark=spark) for path in (first, second))
    found = comparison.compare(a, b, tmp_path / "cmp")

    rows = {(r["config"], r["metric"]): r for r in found.table.records()}
    slower = rows[("clients=8", "mean response time (ms)")]
    latency_a, latency_b = measured_latencies(first, 8), measured_latencies(second, 8)
    reference = sp_stats.ttest_ind(latency_b, latency_a, equal_var=False)
    assert slower["a"] == pytest.approx(latency_a.mean(), rel=1e-9)
    assert slower["b"] == pytest.approx(latency_b.mean(), rel=1e-9)
    assert slower["difference"] == pytest.approx(slower["b"] - slower["a"])
    assert slower["p_value"] == pytest.approx(reference.pvalue, rel=1e-6, abs=1e-300)
    assert slower["significant"] is True and slower["change_percent"] > 50
    same = rows[("clients=1", "mean response time (ms)")]
    reference = sp_stats.ttest_ind(
        measured_latencies(second, 1), measured_latencies(first, 1), equal_var=False
    )
    assert same["p_value"] == pytest.approx(reference.pvalue, rel=1e-6)
    assert same["significant"] == (reference.pvalue < 0.05)
    assert {metric for _, metric in rows} >= {"throughput (req/s)", "delivery p90 (ms)"}
    html = (tmp_path / "cmp" / "index.html").read_text()
    assert "against" in html and "tables/comparison.csv" in html


def test_the_command_wants_one_experiment_or_two_to_compare() -> None:
    result = CliRunner().invoke(analyze, [])
    assert result.exit_code == 2
    assert "give EXPERIMENT_DIR, or --compare A B" in result.output
