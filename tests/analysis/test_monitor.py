"""The monitor records' traces and depth regression, on small tables known by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy import stats as sp_stats

from courier.analysis import errors, io, monitor, synthetic, trimming
from courier.measurements import manifest, parquet, record_schema
from helpers.records import record_table

S = 1_000_000_000
MIB = 2**20
# r1 spans 1 s to 60 s after the epoch, and is measured from 2 s to 50 s.
BOUNDS = [trimming.Bounds("r1", 1 * S, 60 * S, 2 * S, 50 * S)]


def resources(*rows: tuple[str, str, int, float, int]) -> pa.Table:
    return record_table(
        record_schema.RESOURCES, [(run, p, "client", t, c, r) for run, p, t, c, r in rows]
    )


def test_windows_count_seconds_from_the_runs_start_and_keep_its_extent_only() -> None:
    records = resources(
        ("r1", "a", 1 * S, 10.0, MIB),  # the run's first instant: window 0
        ("r1", "a", 6 * S, 10.0, MIB),  # 5 s in: window 1
        ("r1", "a", 7 * S, 10.0, MIB),
        ("r1", "a", 16 * S + 1, 10.0, MIB),  # 15.000000001 s: window 3
        ("r1", "a", S - 1, 10.0, MIB),  # before the start
        ("r1", "a", 60 * S, 10.0, MIB),  # the end is not in the run
        ("r9", "a", 7 * S, 10.0, MIB),  # a run without bounds
    )
    found = monitor.windowed(records, BOUNDS, 5.0)
    assert found.column("ts_ns").to_pylist() == [1 * S, 6 * S, 7 * S, 16 * S + 1]
    assert found.column("t_s").to_pylist() == [0.0, 5.0, 6.0, 15.000000001]
    assert found.column("window").to_pylist() == [0, 1, 1, 3]


def test_resources_are_each_process_mean_cpu_and_peak_rss_per_window() -> None:
    records = resources(
        ("r1", "a", 1 * S, 10.0, 2 * MIB),
        ("r1", "a", 2 * S, 30.0, 6 * MIB),
        ("r1", "a", 6 * S, 50.0, 3 * MIB),
        ("r1", "b", 2 * S, 80.0, MIB // 2),
    )
    rows = monitor.resources_per_window(monitor.windowed(records, BOUNDS, 5.0))
    assert sorted(rows, key=lambda r: (r["process"], r["window"])) == [
        {"run_id": "r1", "process": "a", "tier": "client", "window": 0,
         "cpu_percent": 20.0, "rss_mib": 6.0},
        {"run_id": "r1", "process": "a", "tier": "client", "window": 1,
         "cpu_percent": 50.0, "rss_mib": 3.0},
        {"run_id": "r1", "process": "b", "tier": "client", "window": 0,
         "cpu_percent": 80.0, "rss_mib": 0.5},
    ]  # fmt: skip


def test_gc_pauses_are_counted_summed_and_the_longest_kept_per_window() -> None:
    pauses = record_table(
        record_schema.GC_PAUSES,
        [
            ("r1", "a", 1 * S, 0, 2_000_000, 5),
            ("r1", "a", 3 * S, 2, 5_000_000, 9),
            ("r1", "a", 11 * S, 1, 1_500_000, 1),
        ],
    )
    rows = monitor.gc_per_window(monitor.windowed(pauses, BOUNDS, 5.0))
    assert sorted(rows, key=lambda r: r["window"]) == [
        {"run_id": "r1", "process": "a", "window": 0,
         "pauses": 2, "pause_ms": 7.0, "max_pause_ms": 5.0},
        {"run_id": "r1", "process": "a", "window": 2,
         "pauses": 1, "pause_ms": 1.5, "max_pause_ms": 1.5},
    ]  # fmt: skip


def test_queue_depth_is_summed_over_queues_then_averaged_per_window() -> None:
    depths = record_table(
        record_schema.QUEUE_DEPTHS,
        [
            ("r1", 1 * S, 1, 3), ("r1", 1 * S, 2, 4),  # 7 in all
            ("r1", 2 * S, 1, 5),  # 5
            ("r1", 7 * S, 2, 9),  # 9, in window 1
            ("r2", 1 * S, 1, 100),
        ],
    )  # fmt: skip
    totals = monitor.total_queue_depth(depths)
    assert sorted(totals.to_pylist(), key=lambda r: (r["run_id"], r["ts_ns"])) == [
        {"run_id": "r1", "ts_ns": 1 * S, "messages": 7},
        {"run_id": "r1", "ts_ns": 2 * S, "messages": 5},
        {"run_id": "r1", "ts_ns": 7 * S, "messages": 9},
        {"run_id": "r2", "ts_ns": 1 * S, "messages": 100},
    ]
    rows = monitor.depth_per_window(monitor.windowed(totals, BOUNDS, 5.0))
    assert sorted(rows, key=lambda r: r["window"]) == [
        {"run_id": "r1", "window": 0, "messages": 6.0},
        {"run_id": "r1", "window": 1, "messages": 9.0},
    ]


def test_the_depth_regression_covers_the_measured_interval_as_scipy_fits_it() -> None:
    rng = np.random.default_rng(7)
    seconds = np.arange(1, 60)
    messages = (40 + 0.5 * seconds + rng.integers(-3, 4, len(seconds))).astype(int)
    totals = record_table(
        record_schema.QUEUE_DEPTHS,
        [("r1", int(t) * S, 1, int(m)) for t, m in zip(seconds, messages, strict=True)],
    ).drop_columns(["queue_id"])
    row = monitor.depth_regressions(totals, BOUNDS)["r1"]
    measured = (seconds >= 2) & (seconds < 50)  # keep_from 2 s, keep_until 50 s
    x, y = seconds[measured] - 1.0, messages[measured]  # seconds since the run's start
    reference = sp_stats.linregress(x, y)
    assert row["n"] == measured.sum() == 48
    assert row["cov_xy"] / row["var_x"] == pytest.approx(reference.slope)
    assert row["mean_y"] - reference.slope * row["mean_x"] == pytest.approx(reference.intercept)
    assert row["var_y"] == pytest.approx(np.var(y, ddof=1))


def test_one_depth_sample_has_no_variance_and_a_run_without_samples_no_row() -> None:
    totals = pa.table({"run_id": ["r1"], "ts_ns": [3 * S], "messages": [4]})
    bounds = [*BOUNDS, trimming.Bounds("r2", 0, 10 * S, 0, 10 * S)]
    found = monitor.depth_regressions(totals, bounds)
    assert found == {
        "r1": {"n": 1, "mean_x": 2.0, "mean_y": 4.0, "var_x": None, "var_y": None, "cov_xy": None}
    }


def test_every_monitor_file_of_a_kind_is_read_and_a_kind_without_files_is_empty(
    tmp_path: Path,
) -> None:
    root = synthetic.write_experiment(tmp_path / "exp", factors={"clients": [1, 8]})
    files = io.discover(manifest.load(root))
    files[record_schema.GC_PAUSES] = []
    found = monitor.read(files)
    assert set(found) == set(monitor.KINDS)
    for kind in (record_schema.RESOURCES, record_schema.QUEUE_DEPTHS):
        assert found[kind].schema == record_schema.arrow_schema(kind)
        assert found[kind].num_rows == sum(pq.read_metadata(path).num_rows for path in files[kind])
        assert set(found[kind].column("run_id").to_pylist()) == {"r000", "r001"}
    assert found[record_schema.GC_PAUSES].num_rows == 0
    assert found[record_schema.GC_PAUSES].schema == record_schema.arrow_schema(
        record_schema.GC_PAUSES
    )


def test_files_written_by_a_record_writer_read_back_whole(tmp_path: Path) -> None:
    writer = parquet.RecordWriter(tmp_path, "p", [record_schema.GC_PAUSES])
    writer.append(record_schema.GC_PAUSES, ("r1", "p", 5 * S, 1, 2_000, 3))
    paths = writer.close()
    found = monitor.read({record_schema.GC_PAUSES: paths}, [record_schema.GC_PAUSES])
    assert found[record_schema.GC_PAUSES].to_pylist() == [
        {"run_id": "r1", "process": "p", "ts_ns": 5 * S, "generation": 1,
         "duration_ns": 2_000, "collected": 3}
    ]  # fmt: skip


def test_no_records_or_no_bounds_give_empty_windows_with_every_column() -> None:
    empty = resources()
    columns = [*record_schema.field_names(record_schema.RESOURCES), "t_s", "window"]
    for records, bounds in ((empty, BOUNDS), (resources(("r1", "a", 2 * S, 1.0, 1)), [])):
        found = monitor.windowed(records, bounds, 5.0)
        assert (found.num_rows, found.column_names) == (0, columns)
        assert monitor.resources_per_window(found) == []


def test_counts_and_windows_are_whole_numbers() -> None:
    pauses = record_table(record_schema.GC_PAUSES, [("r1", "a", 1 * S, 0, 2_000_000, 5)])
    (row,) = monitor.gc_per_window(monitor.windowed(pauses, BOUNDS, 5.0))
    assert (type(row["pauses"]), type(row["window"]), type(row["pause_ms"])) == (int, int, float)


def test_a_monitor_file_with_a_null_is_reported_by_name(tmp_path: Path) -> None:
    path = tmp_path / "gc.parquet"
    schema = record_schema.arrow_schema(record_schema.GC_PAUSES)
    nullable = pa.schema([field.with_nullable(True) for field in schema])
    pq.write_table(pa.table([["r1"], ["p"], [None], [1], [2], [3]], schema=nullable), path)
    with pytest.raises(errors.RecordFileError, match=r"gc\.parquet"):
        monitor.read({record_schema.GC_PAUSES: [path]}, [record_schema.GC_PAUSES])
