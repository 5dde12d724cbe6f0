"""Cluster experiments end to end, small: runs with real nodes, middleware, the
controller and recorded clients, then the report."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow.dataset as pads
import pytest

from courier.analysis import replication
from courier.lab import cluster
from courier.measurements import manifest, record_schema

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def spec(tmp_path: Path, admin_dsn: str, text: str) -> cluster.ClusterSpec:
    path = tmp_path / "spec.toml"
    path.write_text(text.replace("ADMIN", admin_dsn))
    return cluster.load(path)


def records(run_dir: Path, kind: str) -> list[dict[str, object]]:
    return pads.dataset(str(run_dir / kind)).to_table().to_pylist()


def summary(report_dir: Path) -> list[dict[str, str]]:
    with (report_dir / "summary.csv").open() as rows:
        return list(csv.DictReader(rows))


async def test_balanced_and_round_robin_runs_deliver_every_message_and_are_reported(
    tmp_path: Path, postgres_admin_dsn: str, spark: SparkSession
) -> None:
    planned = spec(tmp_path, postgres_admin_dsn, """
name = "policies"
[cluster]
nodes = 2
middleware = 1
replicas = 2
admin_dsns = ["ADMIN"]
[clients]
producers = 2
consumers = 4
messages_per_producer = 300
messages_per_consumer = 150
order = "PC"
max_duration_s = 60
[controller]
move_above = 5
[factors]
policy = ["balanced", "round_robin"]
""")  # fmt: skip
    experiment = await cluster.run_experiment(planned, tmp_path / "out")
    assert [run.levels for run in manifest.load(experiment).runs] == [
        {"policy": "balanced"}, {"policy": "round_robin"},
    ]  # fmt: skip
    for run_id in ("r000", "r001"):
        sends = [r for r in records(experiment / run_id, record_schema.CLIENT_REQUESTS)
                 if r["operation"] == "send" and r["status"] == "OK"]  # fmt: skip
        assert len(sends) == 600
    rows = summary(replication.write_report(experiment, spark))
    assert [(r["policy"], r["produced"], r["consumed"]) for r in rows] == [
        ("balanced", "600", "600"), ("round_robin", "600", "600"),
    ]  # fmt: skip
    # Whatever order the six join in, balanced gives each member one producer and two
    # consumers (round robin's split depends on the order).
    assert rows[0]["clients_per_member"] == "1:1P/2C 2:1P/2C"
    assert (experiment / "report" / "figures" / "run-r001.png").stat().st_size > 0
    assert "round_robin" in (experiment / "report" / "index.html").read_text()


async def test_a_growing_load_makes_the_controller_add_a_member(
    tmp_path: Path, postgres_admin_dsn: str, spark: SparkSession
) -> None:
    planned = spec(tmp_path, postgres_admin_dsn, """
name = "growing"
[cluster]
nodes = 2
middleware = 1
replicas = 1
admin_dsns = ["ADMIN"]
[clients]
producers = 2
consumers = 3
messages_per_producer = 100000
messages_per_consumer = 60000
order = "PC"
join_every_s = 0.4
max_duration_s = 4
[controller]
provision = true
capacity = 2
inhibition_s = 0
interval_s = 0.2
""")  # fmt: skip
    experiment = await cluster.run_experiment(planned, tmp_path / "out")
    decisions = records(experiment / "r000", record_schema.CLUSTER_DECISIONS)
    assert [(d["decision"], d["member"], d["node"]) for d in decisions][:1] == [("add", 2, 2)]
    samples = records(experiment / "r000", record_schema.REPLICA_SAMPLES)
    assert {s["member"] for s in samples} == {1, 2}
    [row] = summary(replication.write_report(experiment, spark))
    assert (row["added"], row["members_at_end"]) == ("1", "2")
    assert int(row["consumed"]) > 0


def test_a_spec_that_cannot_run_is_refused_with_its_reason(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[cluster]\nnodes = 1\nreplicas = 2\n")
    with pytest.raises(cluster.ClusterSpecError, match="replicas must be 1 to nodes"):
        cluster.load(path)
    path.write_text("[clients]\nproducers = 1\nconsumers = 2\nmessages_per_producer = 10\n"
                    "messages_per_consumer = 10\n")  # fmt: skip
    with pytest.raises(cluster.ClusterSpecError, match="quotas exceed"):
        cluster.load(path)
    path.write_text("[cluster]\nspeed = 3\n")
    with pytest.raises(cluster.ClusterSpecError, match=r"\[cluster\] speed is not a parameter"):
        cluster.load(path)


def test_the_joining_order_repeats_until_every_role_has_joined() -> None:
    run = cluster.ClusterRun(producers=2, consumers=5, order="PCC")
    assert "".join(role.value[0].upper() for role in run.arrivals()) == "PCCPCCC"
    only_consumers = cluster.ClusterRun(producers=1, consumers=1, order="C")
    assert [role.value for role in only_consumers.arrivals()] == ["consumer", "producer"]
