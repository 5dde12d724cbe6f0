"""The component breakdown's field sums against a row-by-row join done in Python."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import pytest
from pyspark import testing
from pyspark.sql import DataFrame, SparkSession

from courier.analysis import component_sums, components, transforms
from helpers.records import client_rows, server_rows

SERVER_FIELDS = (
    "queued_ns",
    "pool_wait_ns",
    "db_round_trip_ns",
    "db_exec_ns",
    "deserialize_ns",
    "serialize_ns",
    "total_ns",
)
CLIENT_FIELDS = ("response_ns", "serialize_ns", "deserialize_ns")
ERRORS = {"QUEUE_NOT_FOUND", "SERVER_FULL"}


def sums_of(spark: SparkSession, client: list[dict[str, Any]], server: list[dict[str, Any]]) -> Any:
    measured = client_rows(spark, client).transform(transforms.classify)
    return component_sums.field_sums(measured, server_rows(spark, server), None)


def test_one_request_splits_into_components_that_add_up(spark: SparkSession) -> None:
    client: list[dict[str, Any]] = [
        {"client_id": 7, "request_id": 3, "response_ns": 1_000_000,
         "serialize_ns": 10_000, "deserialize_ns": 20_000},
        {"client_id": 7, "request_id": 4},  # no server record: left out
    ]  # fmt: skip
    server: list[dict[str, Any]] = [
        {"client_id": 7, "request_id": 3, "queued_ns": 50_000, "pool_wait_ns": 30_000,
         "db_round_trip_ns": 400_000, "db_exec_ns": 250_000, "deserialize_ns": 5_000,
         "serialize_ns": 15_000, "total_ns": 600_000},
        {"run_id": "r2", "client_id": 7, "request_id": 4, "total_ns": 1},  # another run
    ]  # fmt: skip
    sums = sums_of(spark, client, server)
    assert sums[("r1", "send")]["matched"] == 1
    (row,) = components.pool_by_config(sums, {"r1": "x=1"}).records()
    expected = {
        "response_ms": 1.0, "queued_ms": 0.05, "pool_wait_ms": 0.03, "db_exec_ms": 0.25,
        "db_rest_ms": 0.15, "server_other_ms": 0.1, "serialization_ms": 0.05,
        "network_ms": 0.37,
    }  # fmt: skip
    assert {k: row[k] for k in expected} == pytest.approx(expected)
    assert row["requests"] == 1


def mixed_records() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Requests of clients that agree on both sides, and of clients that differ in
    each way a row join notices."""
    rng = np.random.default_rng(7)
    client: list[dict[str, Any]] = []
    server: list[dict[str, Any]] = []
    statuses = ["OK", "OK", "QUEUE_EMPTY", "QUEUE_NOT_FOUND"]
    for run in ("r1", "r2"):
        for client_id in range(1, 8):
            for request_id in range(10 * client_id, 10 * client_id + 6):
                operation = ["send", "pop"][int(rng.integers(2))]
                status = statuses[int(rng.integers(len(statuses)))]
                keys = {"run_id": run, "client_id": client_id, "request_id": request_id,
                        "operation": operation, "status": status}  # fmt: skip
                client.append(keys | {f: int(rng.integers(1, 10**6)) for f in CLIENT_FIELDS})
                server.append(keys | {f: int(rng.integers(1, 10**6)) for f in SERVER_FIELDS})
    differing = [row for row in server if row["run_id"] == "r1"]
    server.remove(next(r for r in differing if r["client_id"] == 2))  # a lost server record
    extra = next(r for r in differing if r["client_id"] == 3 and r["request_id"] == 32)
    client.remove(_client_of(client, extra))  # a server record of an unmeasured request
    next(r for r in differing if r["client_id"] == 4)["status"] = "SERVER_FULL"  # disagree
    server[:] = [r for r in server if (r["run_id"], r["client_id"]) != ("r1", 5)]  # none
    outside = next(r for r in server if (r["run_id"], r["client_id"]) == ("r2", 6))
    server.append(outside | {"request_id": 999})  # beyond the client's measured ids
    for side in (client, server):  # before login: every connection's first request
        side.extend(dict(side[0], client_id=0, request_id=1) for _ in range(3))
    return client, server


def _client_of(client: list[dict[str, Any]], row: dict[str, Any]) -> dict[str, Any]:
    keys = ("run_id", "client_id", "request_id")
    return next(c for c in client if all(c[k] == row[k] for k in keys))


def reference_sums(
    client: list[dict[str, Any]], server: list[dict[str, Any]]
) -> dict[tuple[str, str], dict[str, int]]:
    """The sums by a plain join in Python, grouped by the client's operation, of
    the logged-in clients' requests."""
    by_key = {(r["run_id"], r["client_id"], r["request_id"]): r for r in server}
    sums: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for c in client:
        s = by_key.get((c["run_id"], c["client_id"], c["request_id"]))
        if s is None or c["client_id"] == 0:  # keys before login repeat: never matched
            continue
        cell = sums[(c["run_id"], c["operation"])]
        cell["matched"] += 1
        if c["status"] in ERRORS:
            continue
        cell["requests"] += 1
        cell["response_ns"] += c["response_ns"]
        cell["client_codec_ns"] += c["serialize_ns"] + c["deserialize_ns"]
        cell["server_codec_ns"] += s["serialize_ns"] + s["deserialize_ns"]
        for name in ("queued_ns", "pool_wait_ns", "db_round_trip_ns", "db_exec_ns", "total_ns"):
            cell[name] += s[name]
    return {group: dict(cell) for group, cell in sums.items()}


@pytest.mark.parametrize("packed", [False, True])
def test_sums_equal_those_of_a_row_join(spark: SparkSession, packed: bool) -> None:
    client, server = mixed_records()
    measured = client_rows(spark, client).transform(transforms.classify)
    key = None
    if packed:
        ranges = {"client_id": (1, 7), "request_id": (10, 999)}
        key = transforms.packed_key(["r1", "r2"], ranges)
    found = component_sums.field_sums(measured, server_rows(spark, server), key)
    assert found == reference_sums(client, server)


def test_only_the_clients_that_differ_are_joined(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, server = mixed_records()
    joined_clients: list[set[tuple[str, int]]] = []
    join = component_sums.join_server

    def recording_join(left: DataFrame, right: DataFrame, key: Any = None) -> DataFrame:
        rows = left.select("run_id", "client_id").distinct().collect()
        joined_clients.append({(r["run_id"], r["client_id"]) for r in rows})
        return join(left, right, key)

    monkeypatch.setattr(component_sums, "join_server", recording_join)
    sums_of(spark, client, server)
    # Lost record, unmeasured record, disagreeing status; r1's client 5 has no
    # server record at all, and r2's client 6 only one beyond its measured ids.
    assert joined_clients == [{("r1", 2), ("r1", 3), ("r1", 4)}]

    joined_clients.clear()
    agreeing = [r for r in server if r["run_id"] == "r2" and r["request_id"] != 999]
    sums_of(spark, [r for r in client if r["run_id"] == "r2"], agreeing)
    assert joined_clients == []


def test_a_packed_key_joins_the_same_requests_as_the_three_keys(spark: SparkSession) -> None:
    ids = [(r, c, q) for r in ("r1", "r2") for c in (3, 9) for q in (0, 5)]
    client = client_rows(
        spark,
        [
            {"run_id": r, "client_id": c, "request_id": q, "response_ns": 1_000 * q + c}
            for r, c, q in ids
        ]
        + [{"run_id": "r3", "client_id": 3, "request_id": 0}],  # a run without bounds
    ).transform(transforms.classify)
    server = server_rows(
        spark,
        [
            {"run_id": r, "client_id": c, "request_id": q, "total_ns": 10 * q + c}
            for r, c, q in ids[::2]  # every other request has a server record
        ]
        + [{"run_id": "r3", "client_id": 3, "request_id": 0}],
    )
    ranges = {"client_id": (3, 9), "request_id": (0, 5)}
    key = transforms.packed_key(["r1", "r2"], ranges)
    assert key is not None
    by_keys = client.where("run_id != 'r3'").transform(component_sums.join_server, server)
    by_key = client.transform(component_sums.join_server, server, key)
    columns = [c for c in by_keys.columns if c not in ("client_id", "request_id")]
    testing.assertDataFrameEqual(by_key.select(*columns), by_keys.select(*columns))
    assert by_key.count() == len(ids[::2])
