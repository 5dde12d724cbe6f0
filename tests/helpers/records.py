"""Records as small Spark DataFrames or Arrow tables, for analysis tests."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from courier.analysis import io
from courier.measurements import record_schema


def client_rows(spark: SparkSession, rows: list[dict[str, Any]]) -> DataFrame:
    """Client request records; unspecified fields get harmless defaults."""
    defaults: dict[str, Any] = {
        "run_id": "r1",
        "process": "load-0",
        "behaviour": "mixed",
        "server": "s:1",
        "client_id": 1,
        "request_id": 1,
        "operation": "send",
        "status": "OK",
        "start_ns": 1_500,
        "response_ns": 1_000_000,
        "serialize_ns": 0,
        "deserialize_ns": 0,
        "bytes_sent": 10,
        "bytes_received": 10,
        "message_ids": [],
        "queue_ids": [],
    }
    schema = io.SPARK_SCHEMAS[record_schema.CLIENT_REQUESTS]
    full = [tuple({**defaults, **row}[name] for name in schema.fieldNames()) for row in rows]
    return spark.createDataFrame(full, schema)


def server_rows(spark: SparkSession, rows: list[dict[str, Any]]) -> DataFrame:
    defaults: dict[str, Any] = {
        "run_id": "r1",
        "instance": "s:1",
        "client_id": 1,
        "request_id": 1,
        "operation": "send",
        "status": "OK",
        "receive_ns": 1_500,
        "queued_ns": 0,
        "pool_wait_ns": 0,
        "db_round_trip_ns": 0,
        "db_exec_ns": 0,
        "deserialize_ns": 0,
        "serialize_ns": 0,
        "total_ns": 0,
    }
    schema = io.SPARK_SCHEMAS[record_schema.SERVER_REQUESTS]
    full = [tuple({**defaults, **row}[name] for name in schema.fieldNames()) for row in rows]
    return spark.createDataFrame(full, schema)


def record_table(kind: str, rows: list[tuple[Any, ...]]) -> pa.Table:
    """Rows of a record kind, values in its contract's order, as its Arrow table."""
    schema = record_schema.arrow_schema(kind)
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in schema]
    return pa.table(
        [pa.array(column, f.type) for column, f in zip(columns, schema, strict=True)],
        schema=schema,
    )
