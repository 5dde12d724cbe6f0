"""Reading record files into Spark, and writing result tables.

The Spark schemas below mirror ``courier.lab.records.FIELDS`` field by field (a test
holds them equal). Every file is checked with pyarrow before Spark sees it: its
footer must parse and its columns must carry the record schema's types, so a
truncated or foreign file is reported by name instead of as a Spark stack trace.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as spark_types

from courier.analysis import errors, tables
from courier.analysis import manifest as manifest_
from courier.lab import records


def _fields(*pairs: tuple[str, spark_types.DataType]) -> spark_types.StructType:
    return spark_types.StructType(
        [spark_types.StructField(name, kind, nullable=False) for name, kind in pairs]
    )


_STRING, _LONG, _INT, _DOUBLE = (
    spark_types.StringType(),
    spark_types.LongType(),
    spark_types.IntegerType(),
    spark_types.DoubleType(),
)

SPARK_SCHEMAS: dict[str, spark_types.StructType] = {
    records.CLIENT_REQUESTS: _fields(
        ("run_id", _STRING),
        ("process", _STRING),
        ("behaviour", _STRING),
        ("server", _STRING),
        ("client_id", _LONG),
        ("request_id", _LONG),
        ("operation", _STRING),
        ("status", _STRING),
        ("start_ns", _LONG),
        ("response_ns", _LONG),
        ("serialize_ns", _LONG),
        ("deserialize_ns", _LONG),
        ("bytes_sent", _LONG),
        ("bytes_received", _LONG),
    ),
    records.SERVER_REQUESTS: _fields(
        ("run_id", _STRING),
        ("instance", _STRING),
        ("client_id", _LONG),
        ("request_id", _LONG),
        ("operation", _STRING),
        ("status", _STRING),
        ("receive_ns", _LONG),
        ("queued_ns", _LONG),
        ("pool_wait_ns", _LONG),
        ("db_round_trip_ns", _LONG),
        ("db_exec_ns", _LONG),
        ("deserialize_ns", _LONG),
        ("serialize_ns", _LONG),
        ("total_ns", _LONG),
    ),
    records.RESOURCES: _fields(
        ("run_id", _STRING),
        ("process", _STRING),
        ("tier", _STRING),
        ("ts_ns", _LONG),
        ("cpu_percent", _DOUBLE),
        ("rss_bytes", _LONG),
    ),
    records.GC_PAUSES: _fields(
        ("run_id", _STRING),
        ("process", _STRING),
        ("ts_ns", _LONG),
        ("generation", _INT),
        ("duration_ns", _LONG),
        ("collected", _LONG),
    ),
    records.DB_STATS: _fields(
        ("run_id", _STRING),
        ("ts_ns", _LONG),
        ("db_size_bytes", _LONG),
        ("xact_commit", _LONG),
        ("xact_rollback", _LONG),
        ("messages", _LONG),
    ),
    records.QUEUE_DEPTHS: _fields(
        ("run_id", _STRING),
        ("ts_ns", _LONG),
        ("queue_id", _LONG),
        ("messages", _LONG),
    ),
}

RecordFiles = dict[str, list[Path]]


def discover(experiment: manifest_.Manifest) -> RecordFiles:
    """Every finished record file of every run in the manifest, checked, by kind."""
    found: RecordFiles = {kind: [] for kind in records.FIELDS}
    for run in experiment.runs:
        for kind in records.FIELDS:
            for path in _record_files(experiment.directory / run.run_id / kind):
                check_file(path, kind)
                found[kind].append(path)
    return found


def _record_files(directory: Path) -> list[Path]:
    """Finished files only: names starting with '.' or '_' are in progress or metadata."""
    if not directory.is_dir():
        return []
    return sorted(
        path
        for path in directory.glob("*.parquet")
        if path.is_file() and not path.name.startswith((".", "_"))
    )


def check_file(path: Path, kind: str) -> None:
    """Raise RecordFileError unless the file is Parquet with the kind's column types."""
    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowException) as exc:
        raise errors.RecordFileError(path, f"not a readable Parquet file ({exc})") from exc
    for expected in records.arrow_schema(kind):
        index = schema.get_field_index(expected.name)
        if index < 0:
            raise errors.RecordFileError(path, f"{kind} column {expected.name!r} is missing")
        actual = schema.field(index).type
        if actual != expected.type:
            raise errors.RecordFileError(
                path, f"{kind} column {expected.name!r} is {actual}, expected {expected.type}"
            )


def row_counts(files: RecordFiles) -> dict[str, int]:
    """Records per kind (of the kinds that have files), from the Parquet footers."""
    return {
        kind: sum(pq.read_metadata(path).num_rows for path in paths)
        for kind, paths in sorted(files.items())
        if paths
    }


def read(spark: SparkSession, kind: str, paths: Iterable[Path]) -> DataFrame:
    """One record kind as a DataFrame with the contract's columns (empty if no files)."""
    schema = SPARK_SCHEMAS[kind]
    names = [str(path) for path in paths]
    if not names:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).parquet(*names).select(*schema.fieldNames())


def write_table(table: tables.Table, directory: Path) -> tuple[Path, Path]:
    """Write one result table as Parquet and CSV; returns both paths."""
    directory.mkdir(parents=True, exist_ok=True)
    arrow = table.to_arrow()
    parquet_path = directory / f"{table.name}.parquet"
    csv_path = directory / f"{table.name}.csv"
    pq.write_table(arrow, parquet_path)
    pa_csv.write_csv(arrow, csv_path)
    return parquet_path, csv_path
