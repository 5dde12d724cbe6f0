"""The saturation-run verdict on small inline data with known answers.

Only open-loop (saturation) runs are judged; closed-loop runs show n/a.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from scipy import stats as sp_stats

from courier.analysis import errors, monitor, report, stats, trimming, validity
from courier.measurements import manifest, record_schema
from helpers.records import record_table

S = 1_000_000_000
BOUNDS = [trimming.Bounds("r1", 0, 70 * S, 5 * S, 65 * S)]
FAST = {"delivered": 100, "within_5s": 1.0, "late_backlog": 0, "p90": 12.0}
SLOW = {"delivered": 100, "within_5s": 0.5, "late_backlog": 0, "p90": 8_000.0}


def depth_rows(messages: list[int]) -> pa.Table:
    """One total depth sample per second from t = 0, split over two queues."""
    rows = []
    for second, total in enumerate(messages):
        rows += [("r1", second * S, 1, total // 2), ("r1", second * S, 2, total - total // 2)]
    return record_table(record_schema.QUEUE_DEPTHS, rows)


def depth_test(messages: list[int]) -> stats.SlopeTest | None:
    totals = monitor.total_queue_depth(depth_rows(messages))
    return stats.slope_test(monitor.depth_regressions(totals, BOUNDS)["r1"])


def test_a_growing_queue_is_not_stable() -> None:
    noise = [3, -2, 0, 1, -1, 2, -3] * 10
    growing = [100 + second + noise[second] for second in range(70)]
    result = depth_test(growing)
    measured = np.array(growing[5:65])  # the warm-up and cool-down samples are trimmed
    reference = sp_stats.linregress(np.arange(5, 65), measured)
    assert result is not None
    assert result.n == 60
    assert result.slope == pytest.approx(reference.slope)
    assert result.significant
    row = validity.verdict("r1", "c", "open", FAST, result)
    assert (row["p90_ok"], row["depth_stable"], row["valid"]) == (True, False, False)


def test_a_flat_noisy_queue_is_stable() -> None:
    noise = [3, -2, 0, 1, -1, 2, -3]
    flat = [50 + noise[second % 7] for second in range(70)]
    result = depth_test(flat)
    reference = sp_stats.linregress(np.arange(5, 65), np.array(flat[5:65]))
    assert result is not None
    assert result.p_value == pytest.approx(reference.pvalue)
    assert reference.pvalue > 0.05
    row = validity.verdict("r1", "c", "open", FAST, result)
    assert (row["depth_stable"], row["valid"]) == (True, True)


def test_an_empty_queue_throughout_is_stable() -> None:
    result = depth_test([0] * 70)
    assert result is not None
    assert (result.slope, result.significant) == (0.0, False)


@pytest.mark.parametrize(
    ("on_time", "late_backlog", "ok"),
    [(90, 0, True), (89, 0, False), (100, 0, True), (90, 1, False), (91, 1, True)],
)
def test_ninety_percent_must_be_delivered_within_five_seconds(
    on_time: int, late_backlog: int, ok: bool
) -> None:
    # Of 100 delivered messages, on_time came within 5 s; a message still waiting at
    # the end after 5 s counts as late.
    delivered = {"delivered": 100, "within_5s": on_time / 100, "late_backlog": late_backlog}
    flat = stats.SlopeTest(60, 0.0, 50.0, 0.1, 0.0, 1.0, -0.2, 0.2)
    row = validity.verdict("r1", "c", "open", delivered, flat)
    assert row["on_time_share"] == pytest.approx(on_time / (100 + late_backlog))
    assert (row["p90_ok"], row["valid"]) == (ok, ok)


def test_no_depth_samples_gives_no_verdict() -> None:
    row = validity.verdict("r1", "c", "open", FAST, None)
    assert (row["p90_ok"], row["depth_stable"], row["valid"]) == (True, None, None)
    table = validity.table({"r1": "c"}, {"r1": "open"}, {"r1": FAST}, {})
    assert table.records() == [row]
    assert "joined to the read that took it" in table.note


def test_a_run_without_delivered_messages_gets_no_delivery_verdict() -> None:
    row = validity.verdict("r1", "c", "open", {}, None)
    assert (row["delivered"], row["on_time_share"], row["p90_ok"]) == (0, None, None)


def write_manifest(directory: Path, spec: dict[str, Any], factors: dict[str, Any]) -> None:
    """A manifest whose runs take every level of the one factor (if any)."""
    levels = [{name: level} for name, values in factors.items() for level in values] or [{}]
    runs = [{"run_id": f"r{i}", "levels": level} for i, level in enumerate(levels)]
    document = {"name": "x", "spec": spec, "factors": factors, "runs": runs}
    (directory / "manifest.json").write_text(json.dumps(document))


@pytest.mark.parametrize(
    ("spec", "factors", "arrivals"),
    [
        ({}, {}, ["closed"]),  # the lab's default
        ({"workload": {"mix": {"standard": 8}}}, {}, ["closed"]),
        ({"workload": {"arrival": "open", "rate": 20}}, {"rate": [20, 40]}, ["open", "open"]),
        ({"workload": {"rate": 20}}, {"arrival": ["closed", "open"]}, ["closed", "open"]),
    ],
)
def test_arrival_comes_from_the_level_else_the_spec(
    tmp_path: Path, spec: dict[str, Any], factors: dict[str, Any], arrivals: list[str]
) -> None:
    write_manifest(tmp_path, spec, factors)
    runs = manifest.load(tmp_path).runs
    assert [run.arrival for run in runs] == arrivals
    assert [run.open_loop for run in runs] == [a == "open" for a in arrivals]


def test_an_unknown_arrival_is_a_manifest_error(tmp_path: Path) -> None:
    write_manifest(tmp_path, {"workload": {"arrival": "bursty"}}, {})
    with pytest.raises(errors.ManifestError, match="bursty"):
        manifest.load(tmp_path)


def test_only_the_open_loop_run_is_judged(tmp_path: Path) -> None:
    write_manifest(tmp_path, {"workload": {"rate": 20}}, {"arrival": ["closed", "open"]})
    experiment = manifest.load(tmp_path)
    growing = [100 + 2 * second for second in range(70)]
    depths = record_table(
        record_schema.QUEUE_DEPTHS,
        [
            (run_id, second * S, 1, total)
            for run_id in ("r0", "r1")
            for second, total in enumerate(growing)
        ],
    )
    bounds = [trimming.Bounds(run_id, 0, 70 * S, 5 * S, 65 * S) for run_id in ("r0", "r1")]
    regression = monitor.depth_regressions(depths, bounds)
    table = validity.table(
        {"r0": "closed", "r1": "open"},
        {run.run_id: run.arrival for run in experiment.runs},
        {"r0": SLOW, "r1": SLOW},
        regression,
    )
    by_run = {row["run_id"]: row for row in table.records()}
    assert validity.judged_runs(table) == ["r1"]
    # Same measurements (a slope of 2 messages/s, half delivered late); only r1 gets verdicts.
    for row in by_run.values():
        assert row["depth_slope_per_s"] == pytest.approx(2.0)
        assert row["p90_delivery_ms"] == 8_000.0
    assert (by_run["r1"]["p90_ok"], by_run["r1"]["depth_stable"], by_run["r1"]["valid"]) == (
        False,
        False,
        False,
    )
    assert (by_run["r0"]["p90_ok"], by_run["r0"]["depth_stable"], by_run["r0"]["valid"]) == (
        None,
        None,
        None,
    )
    rendered = {row[0]: report.cell_texts(table, row) for row in table.rows}
    verdicts = [table.columns.index(c) for c in ("p90_ok", "depth_stable", "valid")]
    assert [rendered["r0"][i] for i in verdicts] == ["n/a"] * 3
    assert [rendered["r1"][i] for i in verdicts] == ["no"] * 3
