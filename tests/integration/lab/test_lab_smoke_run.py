"""`courier lab run experiments/smoke.toml`, as a new user runs it, and what it records.

One real 10-second experiment (its own embedded PostgreSQL, two real middleware
processes, two load-generator processes); the tests below check its records.
"""

from __future__ import annotations

import collections
import itertools
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from lab_helpers import read_kind

from courier.analysis import io as analysis_io
from courier.measurements import manifest as manifest_
from courier.measurements import record_schema

REPO = Path(__file__).resolve().parents[3]
COURIER = Path(sys.executable).with_name("courier")
NS = 1_000_000_000
SLACK_NS = 1_000_000  # wall and monotonic clocks may drift apart this much in a run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("experiments")
    env = {key: value for key, value in os.environ.items() if not key.startswith("COURIER_")}
    result = subprocess.run(
        [str(COURIER), "lab", "run", "experiments/smoke.toml", "--out", str(out)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    experiment = out / "smoke"
    loaded = manifest_.load(experiment)
    run_dir = experiment / loaded.runs[0].run_id
    return {"result": result, "experiment": experiment, "manifest": loaded, "run_dir": run_dir}


def test_it_reports_done_and_writes_a_manifest_the_analysis_reads(smoke: dict[str, Any]) -> None:
    assert "done" in smoke["result"].stderr
    loaded = smoke["manifest"]
    assert loaded.name == "smoke"
    (run,) = loaded.runs
    assert run.run_id == "r000"
    assert (run.warmup_s, run.cooldown_s) == (2, 1)
    assert run.end_ns is not None and run.start_ns is not None
    assert 9.5 * NS <= run.end_ns - run.start_ns <= 10.5 * NS


def test_every_record_file_has_the_contract_schema(smoke: dict[str, Any]) -> None:
    found = analysis_io.discover(smoke["manifest"])
    recorded = set(record_schema.FIELDS) - set(record_schema.CLUSTER_KINDS)  # no controller
    assert all(found[kind] for kind in recorded), {k: len(v) for k, v in found.items()}
    leftovers = [p for p in smoke["run_dir"].rglob("*.partial")]
    assert leftovers == []


def test_every_request_has_one_client_and_one_middleware_record(smoke: dict[str, Any]) -> None:
    client_rows = read_kind(smoke["run_dir"], record_schema.CLIENT_REQUESTS)
    server_rows = read_kind(smoke["run_dir"], record_schema.SERVER_REQUESTS)
    client_keys = collections.Counter((r["client_id"], r["request_id"]) for r in client_rows)
    server_keys = collections.Counter((r["client_id"], r["request_id"]) for r in server_rows)
    assert len(client_rows) > 1000
    assert set(client_keys.values()) == {1}
    assert set(server_keys.values()) == {1}
    assert client_keys.keys() == server_keys.keys()
    by_key = {(r["client_id"], r["request_id"]): r for r in server_rows}
    for row in client_rows:
        other = by_key[(row["client_id"], row["request_id"])]
        # Both name a READ by what it did: pop or peek.
        assert (row["operation"], row["server"]) == (other["operation"], other["instance"])


def test_both_sides_record_the_same_status(smoke: dict[str, Any]) -> None:
    server = {
        (r["client_id"], r["request_id"]): r["status"]
        for r in read_kind(smoke["run_dir"], record_schema.SERVER_REQUESTS)
    }
    differ = [
        (row["status"], server[(row["client_id"], row["request_id"])])
        for row in read_kind(smoke["run_dir"], record_schema.CLIENT_REQUESTS)
        if row["status"] != server[(row["client_id"], row["request_id"])]
    ]
    assert differ == []


def test_the_standard_clients_ran_the_whole_cycle(smoke: dict[str, Any]) -> None:
    rows = [
        r
        for r in read_kind(smoke["run_dir"], record_schema.CLIENT_REQUESTS)
        if r["behaviour"] == "standard"
    ]
    operations = collections.Counter(r["operation"] for r in rows)
    cycles = operations["create_queue"]
    assert cycles > 50
    # Per cycle: 3 sends, 6 reads, and one each of create, queues_for_me and delete;
    # a client may stop mid-cycle only at the very end, never more than once.
    assert cycles - 8 <= operations["delete_queue"] <= cycles
    assert abs(operations["send"] - 3 * cycles) <= 3 * 8
    assert abs(operations["peek"] - 3 * cycles) <= 3 * 8
    assert abs(operations["pop"] - 3 * cycles) <= 3 * 8
    assert {r["client_id"] for r in rows}.__len__() == 8


def test_component_times_never_exceed_their_totals(smoke: dict[str, Any]) -> None:
    server_rows = read_kind(smoke["run_dir"], record_schema.SERVER_REQUESTS)
    for row in server_rows:
        parts = (
            row["queued_ns"] + row["deserialize_ns"] + row["pool_wait_ns"]
            + row["db_round_trip_ns"] + row["serialize_ns"]
        )  # fmt: skip
        assert min(row[k] for k in row if k.endswith("_ns")) >= 0, row
        assert parts <= row["total_ns"], row
        assert row["db_exec_ns"] <= row["db_round_trip_ns"] or row["db_round_trip_ns"] == 0, row
    for row in read_kind(smoke["run_dir"], record_schema.CLIENT_REQUESTS):
        assert row["serialize_ns"] + row["deserialize_ns"] <= row["response_ns"], row


def test_the_middleware_saw_each_request_within_the_clients_call(smoke: dict[str, Any]) -> None:
    server = {
        (r["client_id"], r["request_id"]): r
        for r in read_kind(smoke["run_dir"], record_schema.SERVER_REQUESTS)
    }
    for row in read_kind(smoke["run_dir"], record_schema.CLIENT_REQUESTS):
        other = server[(row["client_id"], row["request_id"])]
        # One host, one wall clock: the middleware read the frame after the call began
        # and before its reply arrived. (Its total_ns may still exceed response_ns: it
        # ends when write() returns, and a busy host may preempt it just before.)
        assert row["start_ns"] - SLACK_NS <= other["receive_ns"]
        assert other["receive_ns"] <= row["start_ns"] + row["response_ns"] + SLACK_NS


def test_every_process_recorded_its_resources_every_second(smoke: dict[str, Any]) -> None:
    rows = read_kind(smoke["run_dir"], record_schema.RESOURCES)
    by_process: dict[str, list[int]] = collections.defaultdict(list)
    tiers = {}
    for row in rows:
        by_process[row["process"]].append(row["ts_ns"])
        tiers[row["process"]] = row["tier"]
    server_instances = {r["instance"] for r in read_kind(smoke["run_dir"], "server_requests")}
    assert len(server_instances) == 2
    expected = {"clients-0", "clients-1", "runner", "postgres", *server_instances}
    assert set(by_process) == expected
    assert tiers["clients-0"] == "client" and tiers["runner"] == "runner"
    assert tiers["postgres"] == "database"
    assert all(tiers[name] == "middleware" for name in server_instances)
    run = smoke["manifest"].runs[0]
    for process, stamps in by_process.items():
        stamps.sort()
        gaps = [later - earlier for earlier, later in itertools.pairwise(stamps)]
        assert max(gaps) <= 1.5 * NS, (process, gaps)
        # Every process lived through the whole run, so it covers all of it.
        assert stamps[0] <= run.start_ns + 1.5 * NS, process
        assert stamps[-1] >= run.end_ns - 1.5 * NS, process


def test_the_database_was_sampled_every_second(smoke: dict[str, Any]) -> None:
    stats = sorted(read_kind(smoke["run_dir"], record_schema.DB_STATS), key=lambda r: r["ts_ns"])
    assert len(stats) >= 10
    stamps = [row["ts_ns"] for row in stats]
    # Samples are scheduled on a one-second grid: a late one (its queries slow on a
    # loaded box) is followed by an early one, so the gaps average a second, and no
    # second goes by without one beginning (a stuck sampler leaves a long gap).
    gaps = [b - a for a, b in itertools.pairwise(stamps[:-1])]  # the last one is at stop
    assert abs(sum(gaps) / len(gaps) - NS) <= 0.1 * NS
    assert max(gaps) <= 2.5 * NS
    commits = [row["xact_commit"] for row in stats]
    assert commits == sorted(commits) and commits[-1] > commits[0]
    depths = read_kind(smoke["run_dir"], record_schema.QUEUE_DEPTHS)
    assert {row["ts_ns"] for row in depths} <= set(stamps)
    latest = {row["queue_id"]: row["messages"] for row in depths if row["ts_ns"] == stamps[-1]}
    assert sum(latest.values()) == stats[-1]["messages"]
