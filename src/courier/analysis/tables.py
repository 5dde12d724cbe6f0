"""Small result tables: what the statistics produce and the report shows.

A Table is already aggregated (one row per run, operation, window, ...), so it
lives on the driver as plain Python values and is written as Parquet and CSV.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class Table:
    """A named table; ``name`` is its file stem, ``title`` its caption.

    ``applies`` optionally names a boolean column: in a row where it is false, an
    empty cell means "not applicable" rather than "unknown", and the report shows
    it as n/a (the files hold a null either way).
    """

    name: str
    title: str
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    note: str = ""
    applies: str = ""

    def __len__(self) -> int:
        return len(self.rows)

    def column(self, name: str) -> list[Any]:
        index = self.columns.index(name)
        return [row[index] for row in self.rows]

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]

    def where(self, **equal: Any) -> list[dict[str, Any]]:
        """The rows, as dicts, whose named columns hold the given values."""
        return [r for r in self.records() if all(r[k] == v for k, v in equal.items())]

    def to_arrow(self) -> pa.Table:
        data = {name: self.column(name) for name in self.columns}
        return pa.Table.from_pydict(data)


def from_records(
    name: str,
    title: str,
    rows: Sequence[Mapping[str, Any]],
    columns: Iterable[str],
    note: str = "",
    applies: str = "",
) -> Table:
    """A table from dict rows, keeping the given column order."""
    order = tuple(columns)
    cells = [tuple(row.get(c) for c in order) for row in rows]
    return Table(name, title, order, cells, note, applies)


def collect(df: DataFrame) -> list[dict[str, Any]]:
    """Rows of an aggregated (small) DataFrame as dicts, in its column order.

    Through Arrow: a histogram's tens of thousands of rows arrive in a third of the
    time that pickled Row objects take.
    """
    return df.toArrow().to_pylist()


def arrow_schema(**types: pa.DataType) -> pa.Schema:
    """An Arrow schema of these columns, in this order: ``arrow_schema(id=pa.int64())``."""
    return pa.schema(list(types.items()))


def local_frame(spark: SparkSession, rows: Iterable[Sequence[Any]], schema: pa.Schema) -> DataFrame:
    """A DataFrame of a few rows held by the driver, sent to Spark as one Arrow table.

    Spark converts Python tuples in a Python worker, whose start costs about 2 s in
    a fresh session; an Arrow table needs none.
    """
    columns = list(zip(*rows, strict=True)) or [() for _ in schema]
    arrays = [pa.array(column, type=f.type) for column, f in zip(columns, schema, strict=True)]
    return spark.createDataFrame(pa.Table.from_arrays(arrays, schema=schema))
