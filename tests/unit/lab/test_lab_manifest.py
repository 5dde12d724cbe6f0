"""The manifest the runner writes is the one the analysis reads."""

from __future__ import annotations

import json
from pathlib import Path

from courier.analysis import manifest as analysis_manifest
from courier.lab import manifest

TOP_LEVEL = {"name", "spec", "factors", "runs", "git_revision", "packages", "machine"}
RUN_KEYS = {
    "run_id", "levels", "replication", "warmup_s", "cooldown_s", "start_ns", "end_ns",
    "clock_offsets",
}  # fmt: skip


def write_example(directory: Path) -> manifest.ManifestWriter:
    writer = manifest.ManifestWriter(
        directory,
        "demo",
        {"name": "demo", "run": {"duration_s": 60}},
        {"message_size": [200, 2000]},
    )
    for number, size in enumerate([200, 2000]):
        writer.add_run(
            manifest.run_entry(
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
    return writer


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
    loaded = analysis_manifest.load(tmp_path)
    assert loaded.name == "demo"
    assert [run.run_id for run in loaded.runs] == ["r000", "r001"]
    assert loaded.run("r001").levels == {"message_size": 2000}
    assert (loaded.run("r000").warmup_s, loaded.run("r000").cooldown_s) == (10.0, 5.0)
    assert loaded.run("r001").end_ns == 62_000_000_000


def test_each_run_rewrites_the_manifest_whole(tmp_path: Path) -> None:
    writer = manifest.ManifestWriter(tmp_path, "x", {}, {})
    writer.write()
    assert json.loads((tmp_path / "manifest.json").read_text())["runs"] == []
    writer.add_run(manifest.run_entry("r000", {}, 0, warmup_s=0, cooldown_s=0, start_ns=1,
                                      end_ns=2, clock_offsets={}))  # fmt: skip
    assert len(json.loads((tmp_path / "manifest.json").read_text())["runs"]) == 1
    assert [path.name for path in tmp_path.iterdir()] == ["manifest.json"]
