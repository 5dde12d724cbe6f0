"""Applying measured clock offsets to the records of middleware on other hosts."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from courier.lab import clocks
from courier.measurements import manifest, parquet, record_schema

NEAR, FAR = "10.0.0.1:7400", "10.0.0.2:7400"


def server_row(instance: str, receive_ns: int) -> tuple[object, ...]:
    return ("r000", instance, 1, receive_ns, "ping", "OK", receive_ns, 0, 0, 0, 0, 0, 0, 5)


def build(tmp_path: Path) -> Path:
    run_dir = tmp_path / "r000"
    for instance in (NEAR, FAR):
        writer = parquet.RecordWriter(run_dir, instance, [record_schema.SERVER_REQUESTS]).start()
        for n in range(3):
            writer.append(record_schema.SERVER_REQUESTS, server_row(instance, 1_000_000 + n))
        writer.close()
    offsets = {
        NEAR: {"offset_ns": 30, "uncertainty_ns": 50, "applied_ns": 0},  # within the noise
        FAR: {"offset_ns": 250_000, "uncertainty_ns": 60, "applied_ns": 0},
    }
    run = manifest.Run("r000", {}, start_ns=0, end_ns=1, clock_offsets=offsets)
    manifest.Manifest(manifest.path_in(tmp_path), "x", {}, (run,)).write()
    return run_dir


def instants(run_dir: Path) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for path in sorted((run_dir / record_schema.SERVER_REQUESTS).glob("*.parquet")):
        for row in pq.read_table(path).to_pylist():
            found.setdefault(row["instance"], []).append(row["receive_ns"])
    return found


def test_only_significant_offsets_are_applied_and_only_to_that_instance(tmp_path: Path) -> None:
    run_dir = build(tmp_path)
    assert clocks.align_experiment(tmp_path) == {"r000": {FAR: 250_000}}
    shifted = instants(run_dir)
    assert shifted[NEAR] == [1_000_000, 1_000_001, 1_000_002]
    assert shifted[FAR] == [750_000, 750_001, 750_002]
    saved = json.loads((tmp_path / "manifest.json").read_text())["runs"][0]["clock_offsets"]
    assert (saved[FAR]["applied_ns"], saved[NEAR]["applied_ns"]) == (250_000, 0)


def test_aligning_twice_changes_nothing_more(tmp_path: Path) -> None:
    run_dir = build(tmp_path)
    clocks.align_experiment(tmp_path)
    once = instants(run_dir)
    assert clocks.align_experiment(tmp_path) == {}
    assert instants(run_dir) == once
