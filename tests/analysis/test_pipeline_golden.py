"""The pipeline's tables against those of the pipeline before it was restructured.

``golden/pipeline/`` holds every table (CSV) that the pipeline of commit e775bf4
(one Spark job per statistic, a row join of client and server records) wrote for
the generated experiment below, and the response-time histograms its report draws.
The restructured pipeline (one aggregation over the client records, a join on one
packed key, run codes through the delivery pairing) must say the same: equal cells,
floats to within 1e-9 relative (Spark adds partial sums in no fixed order).
Regenerating the goldens from the current pipeline would defeat the test.
"""

from __future__ import annotations

import csv
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from courier.analysis import pipeline, synthetic
from courier.measurements import record_schema

GOLDEN = Path(__file__).parent / "golden" / "pipeline"
TABLES = sorted(path.name for path in GOLDEN.glob("*.csv") if path.stem != "latency_histograms")


@pytest.fixture(scope="module")
def summary(tmp_path_factory: pytest.TempPathFactory, spark: SparkSession) -> pipeline.Summary:
    """The generated experiment of the goldens: four open-loop runs, r003 without
    server records; trimmed at fractional seconds, in 3 s windows."""
    out = tmp_path_factory.mktemp("golden")
    root = synthetic.write_experiment(
        out / "exp",
        factors={"clients": [1, 8]},
        replications=2,
        requests_per_run=20_000,
        duration_s=30.0,
        warmup_s=5.0,
        cooldown_s=5.0,
        seed=7,
        arrival="open",
    )
    shutil.rmtree(root / "r003" / record_schema.SERVER_REQUESTS)
    return pipeline.run(root, spark=spark, trim="2.5:-2.5", window_s=3.0, out=out / "report")


def _read(path: Path) -> list[list[str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def _same(found: str, expected: str) -> bool:
    if found == expected:
        return True
    try:
        a, b = float(found), float(expected)
    except ValueError:
        return False
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _differences(found: list[list[str]], expected: list[list[str]]) -> list[Any]:
    if len(found) != len(expected):
        return [f"{len(found)} rows, expected {len(expected)}"]
    header = expected[0]
    return [
        (index, column, got, want)
        for index, (row, golden) in enumerate(zip(found, expected, strict=True))
        for column, got, want in zip(header, row, golden, strict=True)
        if not _same(got, want)
    ]


@pytest.mark.parametrize("name", TABLES)
def test_every_table_keeps_its_values(summary: pipeline.Summary, name: str) -> None:
    found = _read(summary.report_dir / "tables" / name)
    expected = _read(GOLDEN / name)
    assert found[0] == expected[0]
    assert _differences(found, expected) == []


def test_the_drawn_response_time_histograms_keep_their_counts(summary: pipeline.Summary) -> None:
    assert summary.results is not None
    found = sorted(
        (c["run_id"], c["operation"], int(c["bucket"]), int(c["n"]))
        for c in summary.results.latency_histograms
    )
    expected = sorted(
        (row[0], row[1], int(row[2]), int(row[3]))
        for row in _read(GOLDEN / "latency_histograms.csv")[1:]
    )
    assert found == expected
