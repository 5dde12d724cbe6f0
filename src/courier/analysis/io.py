"""Reading record files into Spark, and writing result tables.

The Spark schemas are derived from ``courier.measurements.record_schema.FIELDS``
(a test holds them equal, field by field). Every file is checked with pyarrow
before Spark sees it: its footer must parse and its columns must carry the record
schema's types, so a truncated or foreign file is reported by name instead of as a
Spark stack trace.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as spark_types
from pyspark.sql.pandas.types import to_arrow_schema

from courier.analysis import errors, tables
from courier.measurements import manifest as manifest_
from courier.measurements import record_schema

_SPARK_TYPES: dict[pa.DataType, spark_types.DataType] = {
    pa.string(): spark_types.StringType(),
    pa.int64(): spark_types.LongType(),
    pa.int32(): spark_types.IntegerType(),
    pa.float64(): spark_types.DoubleType(),
    record_schema.ID_LIST: spark_types.ArrayType(spark_types.LongType()),
}


def _spark_schema(kind: str) -> spark_types.StructType:
    return spark_types.StructType(
        [
            spark_types.StructField(field.name, _SPARK_TYPES[field.type], nullable=False)
            for field in record_schema.FIELDS[kind]
        ]
    )


SPARK_SCHEMAS = {kind: _spark_schema(kind) for kind in record_schema.FIELDS}

RecordFiles = dict[str, list[Path]]
Ranges = dict[str, tuple[int, int]]


def discover(experiment: manifest_.Manifest) -> RecordFiles:
    """Every finished record file of every run in the manifest, checked, by kind."""
    found: RecordFiles = {kind: [] for kind in record_schema.FIELDS}
    for run in experiment.runs:
        for kind in record_schema.FIELDS:
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
    for expected in record_schema.arrow_schema(kind):
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


def id_ranges(files: RecordFiles, kinds: Iterable[str], columns: Iterable[str]) -> Ranges | None:
    """The least and greatest value of each of ``columns`` over the files of ``kinds``,
    from the Parquet footers' statistics; None if a row group has none (or no files)."""
    found: dict[str, list[int]] = {column: [] for column in columns}
    for path in (path for kind in kinds for path in files.get(kind, [])):
        metadata = pq.read_metadata(path)
        for group in range(metadata.num_row_groups):
            row_group = metadata.row_group(group)
            for index in range(row_group.num_columns):
                chunk = row_group.column(index)
                if chunk.path_in_schema not in found:
                    continue
                stats = chunk.statistics
                least, greatest = (
                    (stats.min, stats.max) if stats and stats.has_min_max else (None, None)
                )
                if least is None or greatest is None:
                    return None
                found[chunk.path_in_schema] += [int(least), int(greatest)]
    if not all(found.values()):
        return None
    return {column: (min(values), max(values)) for column, values in found.items()}


def read(spark: SparkSession, kind: str, paths: Iterable[Path]) -> DataFrame:
    """One record kind as a DataFrame with the contract's columns (empty if no files)."""
    schema = SPARK_SCHEMAS[kind]
    names = [str(path) for path in paths]
    if not names:
        return tables.local_frame(spark, [], to_arrow_schema(schema))
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
