"""The manifest the runner writes is the one the analysis reads."""

from __future__ import annotations

import json
from pathlib import Path

from courier.lab import host
from courier.measurements import manifest

TOP_LEVEL = {"name", "spec", "factors", "runs", "git_revision", "packages", "machine"}
RUN_KEYS = {
    "run_id", "levels", "replication", "warmup_s", "cooldown_s", "start_ns", "end_ns",
    "clock_offsets",
}  # fmt: skip


def write_example(directory: Path) -> manifest.Manifest:
    written = host.new_manifest(
        directory,
        "demo",
        {"name": "demo", "run": {"duration_s": 60}},
        {"message_size": [200, 2000]},
    )
    for number, size in enumerate([200, 2000]):
        written = written.with_run(
            manifest.Run(
                f"r{number:03d}",
                {"message_size": size},
                0,
                warmup_s=10.0,
                cooldown_s=5.0,
                start_ns=1_000_000_000 * (number + 1),
                end_ns=1_000_000_000 * (number + 61),
                clock_offsets={"127.0.0.1:7401": {"offset_ns": -12, "uncertainty_ns": 40}},
            )
        )
        written.write()
    return written


def test_the_manifest_has_exactly_the_agreed_shape(tmp_path: Path) -> None:
    write_example(tmp_path)
    document = json.loads((tmp_path / "manifest.json").read_text())
    assert set(document) == TOP_LEVEL
    assert [set(run) for run in document["runs"]] == [RUN_KEYS, RUN_KEYS]
    assert document["factors"] == {"message_size": [200, 2000]}
    assert document["packages"]["pyarrow"]
    assert document["machine"]["cpus"] >= 1


def test_the_analysis_reads_the_runners_manifest(tmp_path: Path) -> None:
    write_example(tmp_path)
    loaded = manifest.load(tmp_path)
    assert loaded.name == "demo"
    assert [run.run_id for run in loaded.runs] == ["r000", "r001"]
    assert loaded.run("r001").levels == {"message_size": 2000}
    assert (loaded.run("r000").warmup_s, loaded.run("r000").cooldown_s) == (10.0, 5.0)
    assert loaded.run("r001").end_ns == 62_000_000_000


def test_each_run_rewrites_the_manifest_whole(tmp_path: Path) -> None:
    written = host.new_manifest(tmp_path, "x", {}, {})
    written.write()
    assert json.loads((tmp_path / "manifest.json").read_text())["runs"] == []
    written.with_run(manifest.Run("r000", {}, 0, warmup_s=0, cooldown_s=0, start_ns=1,
                                  end_ns=2, clock_offsets={})).write()  # fmt: skip
    assert len(json.loads((tmp_path / "manifest.json").read_text())["runs"]) == 1
    assert [path.name for path in tmp_path.iterdir()] == ["manifest.json"]


def test_what_is_written_reads_back_equal(tmp_path: Path) -> None:
    written = write_example(tmp_path)
    assert manifest.load(tmp_path) == written
