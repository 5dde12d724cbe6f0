"""The probes: GC pauses and resource samples, as rows of their record kinds."""

from __future__ import annotations

import gc
import time

import psutil

from courier.lab import probes
from courier.measurements import record_schema

GC_KIND = record_schema.GC_PAUSES


def test_the_gc_recorder_records_a_full_collection() -> None:
    rows: list[tuple[str, tuple[object, ...]]] = []
    pauses = probes.GcPauseRecorder(lambda kind, row: rows.append((kind, row)), "r1", "p")
    pauses.install()
    try:
        garbage = [[] for _ in range(100)]
        for item in garbage:
            item.append(item)  # reference cycles only the collector can free
        del garbage, item
        before = time.time_ns()
        gc.collect()
        after = time.time_ns()
    finally:
        pauses.uninstall()
    full = [row for kind, row in rows if kind == GC_KIND and row[3] == 2]
    assert full, rows
    run_id, process, ts_ns, _, duration_ns, collected = full[-1]
    assert (run_id, process) == ("r1", "p")
    assert before <= ts_ns <= after
    assert 0 < duration_ns <= after - before
    assert collected >= 100


def test_the_resource_sampler_writes_one_row_per_interval_and_a_last_one() -> None:
    rows: list[tuple[object, ...]] = []
    target = probes.SampleTarget("me", "client", psutil.Process())
    sampler = probes.ResourceSampler(
        lambda kind, row: rows.append(row), "r1", [target], interval=0.05
    ).start()
    time.sleep(0.52)
    sampler.stop()
    assert 9 <= len(rows) <= 12  # ten intervals, plus the last sample at stop
    stamps = [row[3] for row in rows]
    assert stamps == sorted(stamps)
    assert all(row[:3] == ("r1", "me", "client") for row in rows)
    assert all(row[4] >= 0.0 and row[5] > 10_000_000 for row in rows)  # CPU %, RSS bytes
