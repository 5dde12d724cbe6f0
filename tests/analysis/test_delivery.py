"""Delivery times: each send paired with the read that took its message.

Checked on inline records with known answers, against numpy/scipy order statistics
on raw samples, on random per-message rows against a pure-Python aggregation of every
grouping set, and on a generated experiment against a pure-Python pairing of its
record files.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf
from scipy import stats as sp_stats

from courier.analysis import (
    delivery,
    delivery_results,
    histograms,
    inputs,
    io,
    synthetic,
    tables,
    transforms,
    trimming,
)
from courier.measurements import manifest, record_schema

MS = 1_000_000
S = 1_000_000_000
BOUNDS = [trimming.Bounds("r1", 0, 100 * S, 10 * S, 90 * S)]
RUN_IDS = [b.run_id for b in BOUNDS]
KEY_SETS = delivery_results.KEY_SETS
HALF_BUCKET = math.sqrt(1 + histograms.RELATIVE_ERROR) - 1  # relative error of a bucket's value
TIMED_SCHEMA = (
    "run_id string, queue_id long, send_op int, receive_op int, fate string, "
    "delivery_ns long, waited_ms double"
)
"""``delivery.timed``'s rows."""


def request(
    operation: str, start_ns: int, ids: list[int], *, status: str = "OK", response_ns: int = MS
) -> dict[str, Any]:
    return {
        "run_id": "r1", "process": "p", "behaviour": "b", "server": "s", "client_id": 1,
        "request_id": start_ns, "operation": operation, "status": status, "start_ns": start_ns,
        "response_ns": response_ns, "serialize_ns": 1, "deserialize_ns": 1, "bytes_sent": 1,
        "bytes_received": 1, "message_ids": ids, "queue_ids": [7] * len(ids),
    }  # fmt: skip


def timed(spark: SparkSession, rows: list[dict[str, Any]]) -> DataFrame:
    schema = io.SPARK_SCHEMAS[record_schema.CLIENT_REQUESTS]
    requests = spark.createDataFrame(rows, schema).transform(transforms.classify)
    bounds = BOUNDS
    return (
        requests.transform(delivery.events, RUN_IDS)
        .transform(delivery.messages, RUN_IDS)
        .transform(delivery.timed, bounds)
    )


def test_each_message_id_is_paired_with_the_queue_at_its_position(spark: SparkSession) -> None:
    """One call's ids and queues are parallel lists: the event of the id at a position
    carries the queue at that position, whatever the order of either."""
    schema = io.SPARK_SCHEMAS[record_schema.CLIENT_REQUESTS]
    send = {**request("send", 20 * S, [30, 10, 20]), "queue_ids": [9, 7, 8]}
    take = {**request("receive_many", 21 * S, [20, 30]), "queue_ids": [8, 9]}
    found = (
        spark.createDataFrame([send, take], schema)
        .transform(transforms.classify)
        .transform(delivery.events, RUN_IDS)
        .select("message_id", "queue_id", "stored")
        .collect()
    )
    assert sorted(tuple(row) for row in found) == [
        (10, 7, True), (20, 8, False), (20, 8, True), (30, 9, False), (30, 9, True),
    ]  # fmt: skip


def test_a_message_is_timed_from_its_send_to_the_first_read_that_took_it(
    spark: SparkSession,
) -> None:
    rows = [
        request("send", 20 * S, [1]),
        request("peek", 21 * S, [1]),  # looked at, not taken
        request("receive", 23 * S, [1], response_ns=5 * MS),  # taken: 3 s + 5 ms
        request("receive", 30 * S, [1]),  # taken again (a lease ran out): not the first
        request("send", 40 * S, [2, 3]),  # to two queues
        request("pop", 41 * S, [3]),
        request("pop", 50 * S, [9]),  # its send is not in the run
        request("send", 5 * S, [4]),  # sent during warm-up
        request("pop", 12 * S, [4]),
        request("pop", 60 * S, [5], status="QUEUE_EMPTY"),
    ]
    frame = (
        spark.createDataFrame(rows, io.SPARK_SCHEMAS[record_schema.CLIENT_REQUESTS])
        .transform(transforms.classify)
        .transform(delivery.events, RUN_IDS)
        .transform(delivery.messages, RUN_IDS)
    )
    by_id = {row["message_id"]: row for row in tables.collect(frame)}
    assert by_id[1]["deliveries"] == 2
    assert delivery.operation_name(by_id[1]["receive_op"]) == "receive"
    fates = sorted(
        (row["fate"], row["delivery_ns"], delivery.operation_name(row["receive_op"]))
        for row in tables.collect(timed(spark, rows))
    )
    assert fates == [
        ("backlog", None, ""),  # message 2
        ("delivered", 1_001 * MS, "pop"),  # message 3
        ("delivered", 3_005 * MS, "receive"),  # message 1
        ("outside", 7_001 * MS, "pop"),  # message 4, sent before the measured interval
        ("unsent", None, "pop"),  # message 9
    ]


def test_the_backlog_has_waited_from_its_send_to_the_end_of_the_run(spark: SparkSession) -> None:
    rows = [request("send", 20 * S, [1]), request("send", 80 * S, [2])]
    found = tables.collect(timed(spark, rows).transform(delivery.aggregate, KEY_SETS))
    fates = delivery.fate_rows(found, "queues")
    assert fates == [
        {"run_id": "r1", "queue_id": 7, "fate": "backlog", "messages": 2,
         "min_waited_ms": 20_000.0, "max_waited_ms": 80_000.0, "late": 2},
    ]  # fmt: skip


def histogram_frame(spark: SparkSession, values: np.ndarray) -> DataFrame:
    """Delivered messages with the given delivery times (ms, whole ns)."""
    codes = [delivery.OPERATIONS.index(name) for name in ("send", "pop")]
    rows = [("r1", 7, *codes, delivery.DELIVERED, round(v * MS), None) for v in values]
    return spark.createDataFrame(rows, TIMED_SCHEMA)


def histogram_of(spark: SparkSession, values: np.ndarray) -> histograms.Histogram:
    frame = histogram_frame(spark, values)
    cells = delivery.histogram_cells(
        tables.collect(frame.transform(delivery.aggregate, {"runs": ["run_id"]}))
    )
    assert {cell["grouping_set"] for cell in cells} == {"runs"}
    return histograms.Histogram.of(cells)


def test_percentiles_and_their_intervals_match_order_statistics(spark: SparkSession) -> None:
    values = np.round(np.random.default_rng(3).lognormal(np.log(200.0), 1.0, 4_000) * MS) / MS
    found = delivery.summary(histogram_of(spark, values))
    ordered = np.sort(values)
    n = len(values)
    assert found["n"] == n
    assert found["mean_ms"] == pytest.approx(values.mean(), rel=1e-9)
    assert found["std_ms"] == pytest.approx(values.std(ddof=1), rel=1e-9)
    low, high = sp_stats.t.interval(0.95, n - 1, loc=values.mean(), scale=sp_stats.sem(values))
    assert (found["ci_low"], found["ci_high"]) == (pytest.approx(low), pytest.approx(high))
    for name, p in delivery.PERCENTILES.items():
        # The order statistic ceil(p n), and the distribution-free 95% interval of the
        # p-quantile: ranks from the binomial(n, p) quantiles.
        exact = ordered[math.ceil(p * n) - 1]
        rank_low = int(sp_stats.binom.ppf(0.025, n, p))
        rank_high = int(sp_stats.binom.ppf(0.975, n, p)) + 1
        assert found[name] == pytest.approx(exact, rel=HALF_BUCKET)
        assert found[f"{name}_low"] == pytest.approx(ordered[rank_low - 1], rel=HALF_BUCKET)
        assert found[f"{name}_high"] == pytest.approx(ordered[rank_high - 1], rel=HALF_BUCKET)
        assert found[f"{name}_low"] <= found[name] <= found[f"{name}_high"]
    assert found["within_5s"] == pytest.approx((values <= 5_000).mean())


def test_merged_histograms_are_the_histogram_of_the_union(spark: SparkSession) -> None:
    rng = np.random.default_rng(5)
    first = np.round(rng.exponential(50.0, 700) * MS) / MS
    second = np.round(rng.exponential(500.0, 300) * MS) / MS
    cells = [
        cell
        for part in (first, second)
        for cell in delivery.histogram_cells(
            tables.collect(
                histogram_frame(spark, part).transform(delivery.aggregate, {"runs": ["run_id"]})
            )
        )
    ]
    merged = delivery.summary(histograms.Histogram.of(cells))
    union = np.concatenate([first, second])
    assert merged["mean_ms"] == pytest.approx(union.mean(), rel=1e-9)
    assert merged["std_ms"] == pytest.approx(union.std(ddof=1), rel=1e-9)
    exact = np.sort(union)[math.ceil(0.9 * len(union)) - 1]
    assert merged["p90"] == pytest.approx(exact, rel=HALF_BUCKET)


def reference_pairing(root: Path) -> dict[str, dict[str, Any]]:
    """Sends and first takes paired in plain Python from the record files."""
    loaded = manifest.load(root)
    result = {}
    for run in loaded.runs:
        assert run.start_ns is not None and run.end_ns is not None
        keep_from = run.start_ns + round(run.warmup_s * S)
        keep_until = run.end_ns - round(run.cooldown_s * S)
        rows = pq.read_table(root / run.run_id / record_schema.CLIENT_REQUESTS).to_pylist()
        sent: dict[int, int] = {}
        taken: dict[int, int] = defaultdict(lambda: 2**63)
        for row in rows:
            if row["status"] != "OK" or row["operation"] == "peek":
                continue
            for message_id in row["message_ids"]:
                if row["operation"] == "send":
                    sent[message_id] = row["start_ns"]
                else:
                    end = row["start_ns"] + row["response_ns"]
                    taken[message_id] = min(taken[message_id], end)
        measured = {m: t for m, t in sent.items() if keep_from <= t < keep_until}
        times = [(taken[m] - t) / MS for m, t in measured.items() if m in taken]
        result[run.run_id] = {
            "sent": len(measured),
            "backlog": sum(1 for m in measured if m not in taken),
            "times": np.array(times),
        }
    return result


def test_a_generated_experiment_pairs_like_a_plain_python_pairing(
    spark: SparkSession, tmp_path: Path
) -> None:
    root = synthetic.write_experiment(
        tmp_path / "exp", factors={"clients": [1, 8]}, requests_per_run=6_000, chunk_rows=2_500
    )
    files = io.discover(manifest.load(root))
    prepared = inputs.load(spark, manifest.load(root), files, None)
    found = delivery_results.compute(prepared)
    expected = reference_pairing(root)
    assert set(found.runs) == set(expected)
    for run_id, row in found.runs.items():
        times = expected[run_id]["times"]
        assert row["sent"] == expected[run_id]["sent"]
        assert row["backlog"] == expected[run_id]["backlog"]
        assert row["delivered"] == row["n"] == len(times) > 0
        assert row["mean_ms"] == pytest.approx(times.mean(), rel=1e-9)
        exact = np.sort(times)[math.ceil(0.5 * len(times)) - 1]
        assert row["p50"] == pytest.approx(exact, rel=HALF_BUCKET)
    backlog = sum(r["messages"] for r in found.backlog.records())
    assert backlog == sum(e["backlog"] for e in expected.values())
    assert found.levels is not None
    levels = {row["level"]: row for row in found.levels.records()}
    assert levels["1"]["n"] == found.runs["r000"]["n"]


def random_timed_rows(count: int) -> list[tuple[Any, ...]]:
    """Messages of two runs and three queues (or none), in every fate, with random times
    where ``delivery.timed`` gives them: a delivery time to messages taken (outside the
    measured interval too), a wait to those never taken, neither to unsent ones."""
    rng = np.random.default_rng(11)
    fates = [delivery.DELIVERED, delivery.BACKLOG, delivery.UNSENT, delivery.OUTSIDE]
    rows = []
    for _ in range(count):
        fate = str(rng.choice(fates))
        taken = fate == delivery.DELIVERED or (fate == delivery.OUTSIDE and rng.random() < 0.5)
        delivery_ns = int(rng.lognormal(np.log(800.0), 1.5) * MS) if taken else None
        waited = not taken and fate != delivery.UNSENT
        waited_ms = float(rng.uniform(0, 9_000)) if waited else None
        queue_id = int(rng.integers(1, 4)) if rng.random() < 0.9 else None
        run_id, send_op, receive_op = (
            rng.choice(["r1", "r2"]),
            rng.integers(1, 3),
            rng.integers(0, 3),
        )
        rows.append((str(run_id), queue_id, int(send_op), int(receive_op), fate, delivery_ns,
                     waited_ms))  # fmt: skip
    return rows


def reference_bucket(delivery_ns: int) -> int:
    """The histogram bucket of a delivery time: ``histograms.bucket``'s formula."""
    ms = max(delivery_ns / MS, 1e-3)
    return math.floor(math.log(ms / 1e-3) / math.log1p(0.01))


def reference_aggregate(rows: list[tuple[Any, ...]]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """``delivery.aggregate``'s figures per grouping set, group, fate and bucket, in plain
    Python: delivery times count for delivered messages only, waits for any fate."""
    columns = ("run_id", "queue_id", "send_op", "receive_op", "fate", "delivery_ns", "waited_ms")
    found: dict[tuple[Any, ...], dict[str, Any]] = {}
    for values in rows:
        row = dict(zip(columns, values, strict=True))
        delivered = row["fate"] == delivery.DELIVERED
        bucket = reference_bucket(row["delivery_ns"]) if delivered else None
        for name, keys in KEY_SETS.items():
            key = (name, *(row[k] for k in keys), row["fate"], bucket)
            cell = found.setdefault(key, {"messages": 0, "times": [], "waits": []})
            cell["messages"] += 1
            if delivered:
                cell["times"].append(row["delivery_ns"])
            if row["waited_ms"] is not None:
                cell["waits"].append(row["waited_ms"])
    return {key: figures(cell) for key, cell in found.items()}


def figures(cell: dict[str, Any]) -> dict[str, Any]:
    times, waits = cell["times"], cell["waits"]
    return {
        "messages": cell["messages"],
        "n": len(times),
        "total_ns": sum(times) if times else None,
        "squares_ns": sum(t * t for t in times) if times else None,
        "on_time": sum(t <= 5_000 * MS for t in times),
        "min_waited_ms": min(waits, default=None),
        "max_waited_ms": max(waits, default=None),
        "late": sum(w > 5_000 for w in waits),
    }


def test_every_grouping_set_sums_its_messages_like_a_plain_python_sum(
    spark: SparkSession,
) -> None:
    rows = random_timed_rows(3_000)
    frame = spark.createDataFrame(rows, TIMED_SCHEMA)
    found = {}
    for cell in tables.collect(frame.transform(delivery.aggregate, KEY_SETS)):
        name = cell["grouping_set"]
        key = (name, *(cell[k] for k in KEY_SETS[name]), cell["fate"], cell["bucket"])
        squares = cell["squares_ns"]
        cell["squares_ns"] = None if squares is None else int(squares)
        found[key] = {column: cell[column] for column in delivery.MERGED_BY}
    expected = reference_aggregate(rows)
    assert set(found) == set(expected)
    for key, cell in expected.items():
        assert found[key] == cell, key


def test_every_operation_code_names_its_operation(spark: SparkSession) -> None:
    names = [*delivery.OPERATIONS[1:], "no_such_operation"]
    frame = spark.createDataFrame([(name,) for name in names], "operation string")
    coded = frame.select("operation", delivery.operation_code(sf.col("operation")).alias("op"))
    found = {row["operation"]: delivery.operation_name(row["op"]) for row in coded.collect()}
    assert found == {**{name: name for name in names[:-1]}, "no_such_operation": ""}
