"""Bad experiment directories give typed errors that name the offending file."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from courier import errors as courier_errors
from courier.analysis import errors, inputs, io, pipeline, synthetic
from courier.measurements import manifest, record_schema


def small_experiment(path: Path) -> Path:
    return synthetic.write_experiment(
        path, factors={}, requests_per_run=40, duration_s=6, warmup_s=1, cooldown_s=1
    )


def test_missing_manifest(tmp_path: Path) -> None:
    with pytest.raises(errors.ManifestError) as caught:
        pipeline.run(tmp_path)
    assert caught.value.path == tmp_path / "manifest.json"
    assert str(tmp_path / "manifest.json") in str(caught.value)
    assert isinstance(caught.value, courier_errors.CourierError)


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ("{not json", "cannot read"),
        ('{"name": "x", "factors": {}}', "missing key 'runs'"),
        ('{"name": "x", "factors": {}, "runs": []}', "no runs"),
        (
            '{"name": "x", "factors": {"c": [1, 2]},'
            ' "runs": [{"run_id": "a", "levels": {"c": 3}}]}',
            "not a declared level",
        ),
        ('{"name": "x", "runs": [{"run_id": "a"}, {"run_id": "a"}]}', "not unique"),
        ('{"name": "x", "runs": [{"run_id": "a", "warmup_s": -1}]}', "negative"),
    ],
)
def test_malformed_manifest(tmp_path: Path, document: str, problem: str) -> None:
    (tmp_path / "manifest.json").write_text(document)
    with pytest.raises(errors.ManifestError, match=problem):
        manifest.load(tmp_path)


def test_corrupt_record_file_is_named(tmp_path: Path) -> None:
    root = small_experiment(tmp_path / "exp")
    broken = root / "r000" / record_schema.SERVER_REQUESTS / "serve-0.parquet"
    broken.write_bytes(broken.read_bytes()[:100])  # truncated: no footer
    with pytest.raises(errors.RecordFileError) as caught:
        io.discover(manifest.load(root))
    assert caught.value.path == broken
    assert str(broken) in str(caught.value)


def test_wrong_column_type_is_named(tmp_path: Path) -> None:
    root = small_experiment(tmp_path / "exp")
    path = root / "r000" / record_schema.QUEUE_DEPTHS / "monitor-0.parquet"
    table = pq.read_table(path)
    as_text = table.set_column(3, "messages", table["messages"].cast(pa.string()))
    pq.write_table(as_text, path)
    with pytest.raises(errors.RecordFileError, match="'messages' is string, expected int64"):
        io.discover(manifest.load(root))


def test_unfinished_files_are_ignored(tmp_path: Path) -> None:
    root = small_experiment(tmp_path / "exp")
    directory = root / "r000" / record_schema.CLIENT_REQUESTS
    (directory / ".load-9.parquet.partial").write_bytes(b"half written")
    found = io.discover(manifest.load(root))
    assert [p.name for p in found[record_schema.CLIENT_REQUESTS]] == ["load-0.parquet"]


def test_no_client_records_at_all(tmp_path: Path, spark: SparkSession) -> None:
    root = synthetic.write_experiment(
        tmp_path / "exp",
        factors={},
        requests_per_run=10,
        kinds=synthetic.kinds_except(record_schema.CLIENT_REQUESTS),
    )
    with pytest.raises(errors.NoRecords):
        pipeline.run(root, spark=spark)


def test_run_without_start_and_end_takes_its_records_extent(
    tmp_path: Path, spark: SparkSession
) -> None:
    root = small_experiment(tmp_path / "exp")
    document = json.loads((root / "manifest.json").read_text())
    for key in ("start_ns", "end_ns"):
        del document["runs"][0][key]
    (root / "manifest.json").write_text(json.dumps(document))
    experiment = manifest.load(root)
    prepared = inputs.load(spark, experiment, io.discover(experiment), None)
    raw = pq.read_table(root / "r000" / record_schema.CLIENT_REQUESTS)
    start = raw["start_ns"].to_numpy()
    end = start + raw["response_ns"].to_numpy()
    bounds = prepared.bounds["r000"]
    assert (bounds.start_ns, bounds.end_ns) == (start.min(), end.max() + 1)
    assert any("records' extent" in note for note in prepared.notes)
