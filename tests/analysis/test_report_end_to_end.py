"""The whole pipeline on a short generated experiment: every section, plot and table.

The experiment has two client levels with two replications each; it records no
database statistics (like a mock run) and run r003 also lacks server records
and queue depths. Per-run figures are checked against numpy computed straight
from the Parquet files.
"""

from __future__ import annotations

import csv
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from courier.analysis import pipeline, report, synthetic, tables
from courier.measurements import record_schema

SECTIONS = (  # findings first, raw tables and the spec last
    "summary",
    "runs",
    "response",
    "delivery",
    "validity",
    "trim",
    "components",
    "traces",
    "factors",
    "factorial",
    "appendix",
)
RUNS = ("r000", "r001", "r002", "r003")
WARMUP_S, COOLDOWN_S = 4.0, 3.0


@pytest.fixture(scope="module")
def experiment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = synthetic.write_experiment(
        tmp_path_factory.mktemp("e2e") / "sweep",
        factors={"clients": [1, 8]},
        replications=2,
        requests_per_run=1_500,
        duration_s=20.0,
        warmup_s=WARMUP_S,
        cooldown_s=COOLDOWN_S,
        kinds=synthetic.kinds_except(record_schema.DB_STATS),
        seed=11,
        arrival="open",  # saturation runs: the validity verdict applies
    )
    for kind in (record_schema.SERVER_REQUESTS, record_schema.QUEUE_DEPTHS):
        shutil.rmtree(root / "r003" / kind)
    return root


@pytest.fixture(scope="module")
def summary(spark: SparkSession, experiment: Path) -> pipeline.Summary:
    steps: list[str] = []
    result = pipeline.run(
        experiment,
        spark=spark,
        window_s=4.0,
        exact_percentiles=True,
        progress=lambda description, done, total: steps.append(description),
    )
    assert steps[: len(pipeline.STEPS)] == list(pipeline.STEPS)
    return result


def table(summary: pipeline.Summary, name: str) -> list[dict[str, Any]]:
    return pq.read_table(summary.report_dir / "tables" / f"{name}.parquet").to_pylist()


def test_report_files_and_sections(summary: pipeline.Summary) -> None:
    html = (summary.report_dir / "index.html").read_text()
    markdown = (summary.report_dir / "report.md").read_text()
    for anchor in SECTIONS:
        assert f'id="{anchor}"' in html
        assert f"](#{anchor})" in markdown
    assert re.findall(r'<section id="(\w+)"', html) == list(SECTIONS)


def test_every_figure_exists_in_png_and_svg_and_is_referenced(
    summary: pipeline.Summary,
) -> None:
    html = (summary.report_dir / "index.html").read_text()
    images = set(re.findall(r'<img src="([^"]+)"', html))
    expected = {
        "trim",
        "components",
        "factor_clients",
        "factorial_0_variation",
        "factorial_1_variation",
        "factorial_0_effects",
        "factorial_1_effects",
        "latency_cdf",
        *(f"trace_{run}" for run in RUNS),
        "delivery_clients",
    }
    assert {Path(src).stem for src in images} == expected
    for src in images:
        png = summary.report_dir / src
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert "<svg" in png.with_suffix(".svg").read_text()[:2000]
        assert f"]({src})" in (summary.report_dir / "report.md").read_text()


def test_log_axes_are_labelled_in_plain_numbers(summary: pipeline.Summary) -> None:
    """The response-time CDF's log axis reads 0.5, 1, 2 (text in the SVG), never a
    scientific 5 x 10^-1, whose labels overlapped on the narrow axes."""
    svg = (summary.report_dir / "plots" / "latency_cdf.svg").read_text()
    labels = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    assert "response time (ms, log scale)" in labels
    numbers = [label for label in labels if re.fullmatch(r"[0-9.]+", label)]
    assert len(numbers) >= 6, labels
    assert not [label for label in labels if "$" in label or "\u00d7" in label or "^" in label]


def test_every_table_is_written_as_parquet_and_csv(summary: pipeline.Summary) -> None:
    html = (summary.report_dir / "index.html").read_text()
    names = set(re.findall(r'href="tables/([^"]+)\.csv"', html))
    assert {
        "runs",
        "by_operation",
        "by_status",
        "by_instance",
        "by_client",
        "components",
        "trim",
        "trace_requests",
        "trace_resources",
        "trace_gc",
        "trace_depth",
        "factor_levels",
        "factorial_0_effects",
        "factorial_0_signs",
        "validity",
    } <= names
    for name in names:
        rows = table(summary, name)
        with (summary.report_dir / "tables" / f"{name}.csv").open() as handle:
            assert len(list(csv.DictReader(handle))) == len(rows)
        assert f'href="tables/{name}.parquet"' in html


def raw_requests(experiment: Path, run_id: str) -> dict[str, np.ndarray]:
    data = pq.read_table(experiment / run_id / record_schema.CLIENT_REQUESTS).to_pydict()
    return {name: np.asarray(values) for name, values in data.items() if not name.endswith("_ids")}


def test_run_figures_match_numpy_on_the_raw_records(
    experiment: Path, summary: pipeline.Summary
) -> None:
    import json

    document = json.loads((experiment / "manifest.json").read_text())
    runs = {row["run_id"]: row for row in table(summary, "runs")}
    assert set(runs) == set(RUNS)
    for entry in document["runs"]:
        raw = raw_requests(experiment, entry["run_id"])
        keep_from = entry["start_ns"] + WARMUP_S * 1e9
        keep_until = entry["end_ns"] - COOLDOWN_S * 1e9
        inside = (raw["start_ns"] >= keep_from) & (raw["start_ns"] < keep_until)
        status = raw["status"][inside]
        errors = ~np.isin(status, ["OK", "QUEUE_EMPTY", "NO_MESSAGE"])
        latency = raw["response_ns"][inside][~errors] / 1e6
        row = runs[entry["run_id"]]
        assert row["requests"] == inside.sum()
        assert row["errors"] == errors.sum()
        assert row["misses"] == np.isin(status, ["QUEUE_EMPTY", "NO_MESSAGE"]).sum()
        assert row["throughput"] == pytest.approx(len(latency) / (keep_until - keep_from) * 1e9)
        assert row["mean"] == pytest.approx(latency.mean(), rel=1e-9)
        assert row["std"] == pytest.approx(latency.std(ddof=1), rel=1e-9)
        assert row["p99"] == pytest.approx(np.percentile(latency, 99), rel=1e-9)


def test_missing_kinds_are_reported_not_fatal(summary: pipeline.Summary) -> None:
    validity = {row["run_id"]: row for row in table(summary, "validity")}
    assert all(validity[run]["judged"] for run in RUNS)
    assert validity["r003"]["depth_samples"] == 0
    assert validity["r003"]["valid"] is None
    assert all(validity[run]["depth_samples"] > 0 for run in ("r000", "r001", "r002"))
    html = (summary.report_dir / "index.html").read_text()
    runs = {row["run_id"]: row for row in table(summary, "runs")}
    matched = sum(runs[run]["requests"] for run in ("r000", "r001", "r002"))
    total = sum(row["requests"] for row in runs.values())
    assert f"{matched} of {total} measured requests matched a server record" in html
    assert "db_stats" not in {row["kind"] for row in table(summary, "record_counts")}


def test_components_add_up_to_the_response_time(summary: pipeline.Summary) -> None:
    rows = table(summary, "components")
    assert {row["operation"] for row in rows} == {"send", "pop", "peek"}
    for row in rows:
        parts = sum(value for key, value in row.items() if key.endswith("_ms")) - row["response_ms"]
        assert parts == pytest.approx(row["response_ms"], rel=1e-9)


def test_factorial_effect_is_half_the_level_difference(summary: pipeline.Summary) -> None:
    runs = {row["run_id"]: row["mean"] for row in table(summary, "runs")}
    low = np.mean([runs["r000"], runs["r001"]])  # clients=1, replications 0 and 1
    high = np.mean([runs["r002"], runs["r003"]])
    effects = {row["term"]: row for row in table(summary, "factorial_1_effects")}
    assert effects["A"]["effect"] == "clients"
    assert effects["A"]["estimate"] == pytest.approx((high - low) / 2)
    assert effects["I"]["estimate"] == pytest.approx((high + low) / 2)
    assert effects["A"]["significant"]  # synthetic latency grows by half at 8 clients


def test_summary_for_callers(summary: pipeline.Summary, experiment: Path) -> None:
    assert summary.report_dir == experiment / "report"
    assert [run["run_id"] for run in summary.runs] == list(RUNS)
    total = sum(pq.read_table(path).num_rows for path in experiment.glob("r0*/*/*.parquet"))
    assert summary.records == total
    assert summary.records_per_second > 0
    assert all(run["judged"] for run in summary.runs)


def test_a_table_note_is_a_paragraph_after_the_markdown_table() -> None:
    note_table = tables.Table("t", "T", ("a", "b"), [(1, 2)], note="How a was measured.")
    document = report.Document(
        "D", [report.Section("s", "S", [report.TableBlock(note_table, "t.parquet", "t.csv")])]
    )
    lines = report.render_markdown(document).splitlines()
    note = lines.index("How a was measured.")
    assert lines[note - 2 : note] == ["| 1 | 2 |", ""]  # GFM would read a next line as a row
