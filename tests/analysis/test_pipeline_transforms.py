"""Transforms on small inline DataFrames whose answers are known by hand."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyspark import testing
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

from courier.analysis import (
    histograms,
    io,
    request_counts,
    results,
    synthetic,
    tables,
    throughput,
    traces,
    transforms,
    trimming,
)
from courier.measurements import manifest, record_schema
from helpers.records import client_rows

HALF_BUCKET = math.sqrt(1 + histograms.RELATIVE_ERROR) - 1
BOUNDS = [
    trimming.Bounds("r1", 1_000, 2_000, 1_100, 1_900),
    trimming.Bounds("r2", 5_000, 9_000, 6_000, 8_000),
]


def test_classify_separates_errors_from_misses(spark: SparkSession) -> None:
    statuses = ["OK", "QUEUE_EMPTY", "NO_MESSAGE", "QUEUE_NOT_FOUND", "SERVER_FULL"]
    df = client_rows(
        spark,
        [{"request_id": i, "status": s, "response_ns": 2_500_000} for i, s in enumerate(statuses)],
    )
    result = df.transform(transforms.classify).select("status", "outcome", "latency_ms")
    expected = spark.createDataFrame(
        [
            ("OK", "ok", 2.5),
            ("QUEUE_EMPTY", "miss", 2.5),
            ("NO_MESSAGE", "miss", 2.5),
            ("QUEUE_NOT_FOUND", "error", None),
            ("SERVER_FULL", "error", None),
        ],
        "status string, outcome string, latency_ms double",
    )
    testing.assertDataFrameEqual(result, expected)
    assert df.transform(transforms.classify).columns == transforms.CLASSIFIED_COLUMNS


def test_each_outcome_code_names_the_outcome_classify_gives(spark: SparkSession) -> None:
    statuses = ["OK", "QUEUE_EMPTY", "NO_MESSAGE", "QUEUE_NOT_FOUND", "SERVER_FULL"]
    df = client_rows(spark, [{"request_id": i, "status": s} for i, s in enumerate(statuses)])
    coded = transforms.outcome_code(sf.col("status"))
    found = df.transform(transforms.classify).select(
        "outcome", coded.alias("code"), transforms.outcome_named(coded).alias("named")
    )
    rows = [(r["outcome"], r["code"], r["named"]) for r in found.orderBy("request_id").collect()]
    assert [(outcome, named) for outcome, _, named in rows] == [
        (outcome, outcome) for outcome, _, _ in rows
    ]
    assert [code for _, code, _ in rows] == [0, 1, 1, 2, 2]


def test_the_counts_name_each_outcome_and_count_by_it(spark: SparkSession) -> None:
    """The one aggregation groups and counts by the outcome's code; its rows name it."""
    second = 10**9
    statuses = ["OK", "OK", "QUEUE_EMPTY", "NO_MESSAGE", "SERVER_FULL"]
    rows = [
        {"run_id": "r1", "request_id": i, "status": s, "start_ns": 2 * second}
        for i, s in enumerate(statuses)
    ]
    counts = counted(client_rows(spark, rows), THREE_RUNS, 5.0)
    detail = [row for row in counts.response_cells() if row["grouping_set"] == "detail"]
    totals: dict[tuple[str, str], list[int]] = {}
    for row in detail:
        cell = totals.setdefault((row["status"], row["outcome"]), [0, 0, 0, 0, 0])
        for k, column in enumerate(("requests", "ok", "misses", "errors", "n")):
            cell[k] += row[column]
    assert totals == {
        ("OK", "ok"): [2, 2, 0, 0, 2],
        ("QUEUE_EMPTY", "miss"): [1, 0, 1, 0, 1],
        ("NO_MESSAGE", "miss"): [1, 0, 1, 0, 1],
        ("SERVER_FULL", "error"): [1, 0, 0, 1, 0],
    }
    assert sum(r["completed"] for r in counts.seconds()) == 4  # errors are not completed


def test_trim_keeps_the_half_open_measured_interval_of_each_run(spark: SparkSession) -> None:
    starts = {"r1": [1_099, 1_100, 1_500, 1_899, 1_900], "r2": [5_999, 6_000, 7_999, 8_000]}
    rows = [
        {"run_id": run, "request_id": i, "start_ns": s}
        for run, values in starts.items()
        for i, s in enumerate(values)
    ]
    rows.append({"run_id": "r3", "request_id": 0, "start_ns": 1_500})  # no bounds: dropped
    df = client_rows(spark, rows)
    bounds = BOUNDS
    trimmed = df.transform(transforms.trim, bounds, "start_ns")
    assert trimmed.columns == df.columns
    expected = spark.createDataFrame(
        [("r1", 1_100), ("r1", 1_500), ("r1", 1_899), ("r2", 6_000), ("r2", 7_999)],
        "run_id string, start_ns long",
    )
    testing.assertDataFrameEqual(trimmed.select("run_id", "start_ns"), expected)


def test_run_time_counts_seconds_from_the_runs_start(spark: SparkSession) -> None:
    bounds = [trimming.Bounds("r1", 10**9, 60 * 10**9, 2 * 10**9, 50 * 10**9)]
    df = spark.createDataFrame(
        [("r1", 10**9), ("r1", 6 * 10**9), ("r1", 16 * 10**9 + 1), ("r9", 7 * 10**9)],
        "run_id string, ts_ns long",
    )
    timed = df.transform(transforms.with_run_time, bounds, "ts_ns")
    expected = spark.createDataFrame(
        [("r1", 10**9, 0.0), ("r1", 6 * 10**9, 5.0), ("r1", 16 * 10**9 + 1, 15.000000001)],
        "run_id string, ts_ns long, t_s double",
    )  # r9 has no bounds: left out
    testing.assertDataFrameEqual(timed, expected)


def test_a_key_range_beyond_a_long_is_refused() -> None:
    ranges = {"client_id": (0, 2**31), "request_id": (-(2**31), 2**31)}
    assert transforms.packed_key(["r1", "r2"], ranges) is None
    assert transforms.packed_key(["r1"], {"client_id": (0, 0), "request_id": (0, 0)}) is not None


def test_id_ranges_come_from_the_parquet_footers(tmp_path: Path) -> None:
    root = synthetic.write_experiment(tmp_path / "exp", requests_per_run=300, chunk_rows=100)
    files = io.discover(manifest.load(root))
    kinds = (record_schema.CLIENT_REQUESTS, record_schema.SERVER_REQUESTS)
    found = io.id_ranges(files, kinds, ("client_id", "request_id"))
    table = pa.concat_tables(
        pq.read_table(path, columns=["client_id", "request_id"])
        for kind in kinds
        for path in files[kind]
    )
    assert found == {
        name: (pc.min(table[name]).as_py(), pc.max(table[name]).as_py())
        for name in ("client_id", "request_id")
    }
    assert io.id_ranges(files, ["no such kind"], ("client_id",)) is None


def counted(
    client: DataFrame, bounds: list[trimming.Bounds], window_s: float
) -> request_counts.Counts:
    """The client records' counts, from the pipeline's one aggregation."""
    fine = results.FINE_KEY_SETS
    found = client.transform(transforms.classify).transform(
        request_counts.count, bounds, window_s, fine
    )
    return request_counts.collect(found, fine)


def test_throughput_per_second_counts_empty_seconds_as_zero(spark: SparkSession) -> None:
    second = 10**9
    run = trimming.Bounds("r1", 0, 4 * second, 0, 3 * second + second // 2)  # 3 whole seconds
    rows: list[dict[str, Any]] = [
        {"request_id": 0, "start_ns": 100},
        {"request_id": 1, "start_ns": 200},
        {"request_id": 2, "start_ns": second + 5, "status": "SERVER_FULL"},  # error
        {"request_id": 3, "start_ns": 2 * second + 7, "status": "QUEUE_EMPTY"},  # miss
        {"request_id": 4, "start_ns": 3 * second + 1},  # in the partial last second
    ]
    counts = counted(client_rows(spark, rows), [run], 5.0)
    assert sorted((r["run_id"], r["second"], r["completed"]) for r in counts.seconds()) == [
        ("r1", 0, 2),
        ("r1", 2, 1),
    ]
    sums = throughput.second_sums(counts.seconds())
    moments = throughput.moments(sums, {"r1": run})["r1"]
    reference = np.array([2, 0, 1])
    assert moments.n == 3
    assert moments.mean == pytest.approx(reference.mean())
    assert moments.std == pytest.approx(reference.std(ddof=1))


THREE_RUNS = [
    trimming.Bounds(run_id, start, start + 10 * 10**9, start + 10**9, start + 9 * 10**9)
    for run_id, start in (("r1", 0), ("r2", 20 * 10**9), ("r3", 40 * 10**9))
]


def test_each_run_is_counted_within_its_own_bounds(spark: SparkSession) -> None:
    second = 10**9
    rows: list[dict[str, Any]] = [
        {"run_id": "r1", "request_id": 0, "start_ns": 2 * second},
        {"run_id": "r1", "request_id": 1, "start_ns": 22 * second},  # in r2's extent only
        {"run_id": "r2", "request_id": 2, "start_ns": 22 * second},
        {"run_id": "r2", "request_id": 3, "start_ns": 23 * second},
        {"run_id": "r2", "request_id": 4, "start_ns": 20 * second},  # in r2's warm-up
        {"run_id": "r3", "request_id": 5, "start_ns": 45 * second},
        {"run_id": "r9", "request_id": 6, "start_ns": 45 * second},  # a run without bounds
    ]
    counts = counted(client_rows(spark, rows), THREE_RUNS, 5.0)
    assert sorted((r["run_id"], r["second"], r["completed"]) for r in counts.seconds()) == [
        ("r1", 1, 1),
        ("r2", 1, 1),
        ("r2", 2, 1),
        ("r3", 4, 1),
    ]
    windows = {(r["run_id"], r["window"]): 0 for r in counts.window_cells()}
    for r in counts.window_cells():
        windows[(r["run_id"], r["window"])] += r["requests"]
    assert windows == {("r1", 0): 1, ("r2", 0): 3, ("r3", 1): 1}


def test_the_count_matches_each_records_run_id_once(spark: SparkSession) -> None:
    """The bounds are read by the run's index: the run ids are compared in one CASE,
    not again in every expression that needs a bound (which costs a comparison per
    run each time, and made a twelve-run experiment take three times the CPU)."""
    found = (
        client_rows(spark, [{"start_ns": 0}])
        .transform(transforms.classify)
        .transform(request_counts.count, THREE_RUNS, 5.0, results.FINE_KEY_SETS)
    )
    plan = found._jdf.queryExecution().optimizedPlan().toString()
    assert [plan.count(f"= {b.run_id})") for b in THREE_RUNS] == [1, 1, 1]


def test_a_grouping_set_without_the_run_is_refused(spark: SparkSession) -> None:
    with pytest.raises(ValueError, match="by_operation"):
        client_rows(spark, [{"start_ns": 0}]).transform(transforms.classify).transform(
            request_counts.count, THREE_RUNS, 5.0, {"by_operation": ["operation"]}
        )


def test_request_trace_windows(spark: SparkSession) -> None:
    second = 10**9
    run = trimming.Bounds("r1", 0, 12 * second, 2 * second, 10 * second)
    rows: list[dict[str, Any]] = [
        {"request_id": 0, "start_ns": -1, "response_ns": 9_000_000},  # before the run
        {"request_id": 1, "start_ns": 1 * second, "response_ns": 1_000_000},
        {"request_id": 2, "start_ns": 4 * second, "response_ns": 3_000_000},
        {"request_id": 3, "start_ns": 6 * second, "status": "INTERNAL"},
        {"request_id": 4, "start_ns": 11 * second, "response_ns": 2_000_000},
        {"request_id": 5, "start_ns": 12 * second, "response_ns": 2_000_000},  # after it
    ]
    cells = counted(client_rows(spark, rows), [run], 5.0).window_cells()
    collected = traces.finish_requests(cells)
    bounds_by_run = {"r1": run}
    trace = traces.with_throughput(
        traces.with_start(collected, bounds_by_run, 5.0), bounds_by_run, 5.0
    )
    got = [(r["t_s"], r["completed"], r["errors"], r["throughput"], r["mean_ms"]) for r in trace]
    assert got == [
        (0.0, 2, 0, 2 / 5, 2.0),
        (5.0, 0, 1, 0.0, None),
        (10.0, 1, 0, 1 / 2, 2.0),  # the last window is 2 s long
    ]
    # p99: the order statistic ceil(0.99 n) (here the largest), to within half a bucket
    p99 = [r["p99_ms"] for r in trace]
    assert p99[0] == pytest.approx(3.0, rel=HALF_BUCKET) and p99[1] is None
    assert p99[2] == pytest.approx(2.0, rel=HALF_BUCKET)


def test_a_local_frame_keeps_its_rows_and_types(
    spark: SparkSession,
) -> None:
    schema = pa.schema([("run_id", pa.string()), ("client_id", pa.int64())])
    rows = [("r1", 7), ("r2", 2**40), ("r1", None)]
    frame = tables.local_frame(spark, rows, schema)
    assert frame.schema.simpleString() == "struct<run_id:string,client_id:bigint>"
    assert [tuple(row) for row in frame.collect()] == rows
    empty = tables.local_frame(spark, [], schema)
    assert empty.schema == frame.schema and empty.count() == 0


def test_a_kind_without_files_is_an_empty_frame_of_its_contract(spark: SparkSession) -> None:
    for kind, schema in io.SPARK_SCHEMAS.items():
        frame = io.read(spark, kind, [])
        assert frame.schema == schema and frame.count() == 0, kind
