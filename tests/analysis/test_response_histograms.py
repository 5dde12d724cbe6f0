"""Response-time summaries from histograms, against numpy and scipy on the raw sample."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pyspark.sql import SparkSession

from courier.analysis import histograms, io, response, stats, tables, transforms
from courier.measurements import record_schema

HALF_BUCKET = math.sqrt(1 + histograms.RELATIVE_ERROR) - 1
KEY_SETS = {"runs": ["run_id"], "by_operation": ["run_id", "operation"]}


def test_every_grouping_matches_numpy(spark: SparkSession) -> None:
    rng = np.random.default_rng(11)
    n = 3_000
    latency_ns = np.round(rng.lognormal(np.log(2e6), 0.8, n)).astype(np.int64)
    operations = rng.choice(["send", "pop"], n)
    statuses = rng.choice(["OK", "QUEUE_EMPTY", "QUEUE_NOT_FOUND"], n, p=[0.8, 0.15, 0.05])
    rows = [
        ("r1", "p", "b", "s", 1, i, str(op), str(st), i, int(ns), 1, 1, 1, 1, [], [])
        for i, (op, st, ns) in enumerate(zip(operations, statuses, latency_ns, strict=True))
    ]
    frame = spark.createDataFrame(rows, io.SPARK_SCHEMAS[record_schema.CLIENT_REQUESTS])
    cells = tables.collect(
        frame.transform(transforms.classify).transform(response.request_histograms, KEY_SETS)
    )
    found = {
        (row["grouping_set"], row.get("operation")): row
        for row in response.finish_request_histograms(cells, KEY_SETS)
    }
    for key, chosen in (
        (("runs", None), np.ones(n, dtype=bool)),
        (("by_operation", "pop"), operations == "pop"),
    ):
        row = found[key]
        measured = chosen & (statuses != "QUEUE_NOT_FOUND")
        values = latency_ns[measured] / 1e6
        assert row["requests"] == chosen.sum()
        assert row["errors"] == (chosen & (statuses == "QUEUE_NOT_FOUND")).sum()
        assert row["misses"] == (chosen & (statuses == "QUEUE_EMPTY")).sum()
        assert row["n"] == len(values)
        assert row["mean"] == pytest.approx(values.mean(), rel=1e-12)
        assert row["std"] == pytest.approx(values.std(ddof=1), rel=1e-9)
        ordered = np.sort(values)
        for name, p in stats.PERCENTILES.items():
            exact = ordered[math.ceil(p * len(values)) - 1]
            assert row[name] == pytest.approx(exact, rel=HALF_BUCKET), name


def test_regrouping_per_grain_gives_the_rows_of_one_aggregation(spark: SparkSession) -> None:
    rng = np.random.default_rng(5)
    n = 2_000
    rows = [
        (str(rng.choice(["r1", "r2"])), "p", "b", str(rng.choice(["s:1", "s:2"])),
         int(rng.integers(1, 5)), i, str(rng.choice(["send", "pop"])),
         str(rng.choice(["OK", "QUEUE_EMPTY", "QUEUE_NOT_FOUND"])), int(rng.integers(0, 60)),
         int(rng.lognormal(np.log(2e6), 0.8)), 1, 1, 1, 1, [], [])
        for i in range(n)
    ]  # fmt: skip
    frame = spark.createDataFrame(rows, io.SPARK_SCHEMAS[record_schema.CLIENT_REQUESTS])
    classified = frame.transform(transforms.classify)
    key_sets = {
        "detail": ["run_id", "operation", "status", "outcome", "server"],
        "by_client": ["run_id", "client_id"],
        "per_start": ["run_id", "start_ns"],
    }
    plain = {"starts": ["run_id", "start_ns"]}
    grains = [
        ["run_id", "operation", "status", "outcome", "server", "client_id", "bucket"],
        ["run_id", "start_ns", "bucket"],
    ]

    def cells(*extra: object) -> list[tuple[object, ...]]:
        found = tables.collect(response.request_histograms(classified, key_sets, plain, *extra))
        # Squares are double sums: two levels may round them otherwise.
        return sorted(
            (str({k: v for k, v in row.items() if k != "squares_ns"}), row["squares_ns"] or 0.0)
            for row in found
        )

    regrouped, direct = cells(grains), cells()
    assert [row for row, _ in regrouped] == [row for row, _ in direct]
    assert [sq for _, sq in regrouped] == pytest.approx([sq for _, sq in direct], rel=1e-12)
    assert len(direct) > 4 * len(key_sets)
