"""`courier analyze`: a report and a summary table, or a clean error and exit code."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession
from rich.console import Console

from courier.analysis import pipeline, synthetic
from courier.cli import analyze as analyze_command
from courier.cli import main
from courier.measurements import record_schema


def analyze(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main.cli, ["analyze", *args])
    return result.exit_code, result.output


def test_missing_manifest_is_a_clean_error(tmp_path: Path) -> None:
    code, output = analyze(str(tmp_path))
    assert code == 1
    assert "manifest.json" in output and "Traceback" not in output


def test_corrupt_file_is_a_clean_error_naming_it(tmp_path: Path) -> None:
    root = synthetic.write_experiment(tmp_path / "exp", factors={}, requests_per_run=20)
    broken = root / "r000" / record_schema.RESOURCES / "monitor-0.parquet"
    broken.write_bytes(b"PAR1 this is not parquet")
    code, output = analyze(str(root))
    assert code == 1
    assert "monitor-0.parquet" in output.replace("\n", "") and "Traceback" not in output


@pytest.mark.parametrize("trim", ["abc", "10:5"])
def test_bad_trim_is_a_usage_error(tmp_path: Path, trim: str) -> None:
    code, output = analyze(str(tmp_path), "--trim", trim)
    assert code == 2
    assert "--trim" in output


def test_analyze_writes_the_report_and_prints_a_summary(
    spark: SparkSession, tmp_path: Path
) -> None:
    root = synthetic.write_experiment(
        tmp_path / "exp", factors={}, requests_per_run=300, duration_s=12.0
    )
    out = tmp_path / "elsewhere"
    code, output = analyze(
        str(root), "--master", "local[2]", "--trim", "2:-2", "--window", "2", "--out", str(out)
    )
    assert code == 0, output
    assert "r000" in output and "records/s" in output
    header = next(line for line in output.splitlines() if "requests" in line)
    assert "valid" not in header  # a closed-loop run is not a saturation run
    assert (out / "index.html").is_file() and (out / "report.md").is_file()
    trim_table = (out / "tables" / "trim.csv").read_text()
    assert "fixed trim 2:-2" in trim_table
    assert not (root / "report").exists()


def summary_text(runs: list[dict[str, Any]]) -> str:
    summary = pipeline.Summary("x", Path("report"), runs, records=10, elapsed_s=1.0)
    buffer = io.StringIO()
    Console(file=buffer, width=160).print(analyze_command.summary_table(summary))
    return buffer.getvalue()


def test_summary_shows_a_verdict_only_for_saturation_runs() -> None:
    measured = {"config": "c", "requests": 9, "errors": 0, "throughput": 9.0}
    measured |= {"mean_ms": 1.0, "p50_ms": 1.0, "p99_ms": 2.0}
    closed = {**measured, "run_id": "r0", "judged": False, "valid": None}
    text = summary_text([closed])
    assert "valid" not in text and "—" not in text
    runs = [closed, {**measured, "run_id": "r1", "judged": True, "valid": False}]
    lines = {words[0]: words for words in map(str.split, summary_text(runs).splitlines()) if words}
    assert "valid" in lines["run"]
    assert (lines["r0"][-1], lines["r1"][-1]) == ("—", "no")
