"""The Spark schema the pipeline reads with mirrors the record contract exactly."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as spark_types

from courier.analysis import io, synthetic
from courier.measurements import parquet, record_schema

# Written out here, independently of courier.analysis.io.
ARROW_TO_SPARK = {
    pa.string(): spark_types.StringType(),
    pa.int64(): spark_types.LongType(),
    pa.int32(): spark_types.IntegerType(),
    pa.float64(): spark_types.DoubleType(),
    pa.list_(pa.int64()): spark_types.ArrayType(spark_types.LongType(), containsNull=True),
}


def test_every_record_kind_has_a_spark_schema() -> None:
    assert set(io.SPARK_SCHEMAS) == set(record_schema.FIELDS)


@pytest.mark.parametrize("kind", sorted(record_schema.FIELDS))
def test_spark_schema_equals_record_schema(kind: str) -> None:
    expected = [
        (field.name, ARROW_TO_SPARK[field.type], field.nullable)
        for field in record_schema.arrow_schema(kind)
    ]
    actual = [(f.name, f.dataType, f.nullable) for f in io.SPARK_SCHEMAS[kind].fields]
    assert actual == expected


def test_reading_a_record_file_keeps_the_contract_columns(
    spark: SparkSession, tmp_path: Path
) -> None:
    root = synthetic.write_experiment(tmp_path / "exp", factors={}, requests_per_run=50)
    for kind in synthetic.Shape().kinds:
        paths = sorted((root / "r000" / kind).glob("*.parquet"))
        df = io.read(spark, kind, paths)
        assert df.columns == record_schema.field_names(kind)
        assert [f.dataType for f in df.schema.fields] == [
            ARROW_TO_SPARK[f.type] for f in record_schema.arrow_schema(kind)
        ]
        assert df.count() > 0


def test_spark_reads_the_encoded_record_files_to_the_values_written(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Thousands of rows: many blocks of delta-encoded numbers and of list values.
    root = synthetic.write_experiment(tmp_path / "exp", factors={}, requests_per_run=3000)
    for kind in synthetic.Shape().kinds:
        paths = sorted((root / "r000" / kind).glob("*.parquet"))
        written = pa.concat_tables(pq.read_table(path) for path in paths).to_pylist()
        read = io.read(spark, kind, paths).toArrow().to_pylist()
        assert len(read) == len(written) > 0, kind
        assert sorted(map(repr, read)) == sorted(map(repr, written)), kind


def test_a_kind_without_files_reads_as_an_empty_frame(spark: SparkSession) -> None:
    df = io.read(spark, record_schema.DB_STATS, [])
    assert df.columns == record_schema.field_names(record_schema.DB_STATS)
    assert df.count() == 0


def test_the_controllers_records_read_with_the_contract_columns(
    spark: SparkSession, tmp_path: Path
) -> None:
    writer = parquet.RecordWriter(tmp_path, "controller", record_schema.CLUSTER_KINDS).start()
    writer.append(
        record_schema.REPLICA_SAMPLES,
        ("r000", 1, "orders", 1, 5, 1, 2, 4, 10, 0.5, 0.25, 8),
    )
    writer.append(
        record_schema.CLUSTER_DECISIONS,
        ("r000", 2, "orders", "add", 2, 2, 0, 6, 16, 0.375, 10),
    )
    writer.close()
    for kind in record_schema.CLUSTER_KINDS:
        df = io.read(spark, kind, sorted((tmp_path / kind).glob("*.parquet")))
        assert df.columns == record_schema.field_names(kind)
        assert df.count() == 1
