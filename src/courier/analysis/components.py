"""Where response time goes: the component breakdown per operation.

Client and server records of the same request are joined on (run_id, client_id,
request_id); requests without a server record (e.g. lost connections, or a run
without server records) are left out and counted. Means are taken over the
measured, non-error requests and pooled over the runs of one configuration.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as sf

from courier.analysis import tables, transforms

COMPONENT_COLUMNS = tuple(f"{name}_ms" for name in transforms.COMPONENTS)
COLUMNS = ("config", "operation", "requests", "response_ms", *COMPONENT_COLUMNS)


def mean_components(split: DataFrame) -> DataFrame:
    """Per run and operation: joined requests, measured ones, and component means.

    ``matched`` counts every joined request; ``requests`` and the means cover the
    measured ones (errors excluded).
    """
    measured = sf.col("outcome") != transforms.ERROR

    def mean(column: str) -> Column:
        return sf.avg(sf.when(measured, sf.col(column))).alias(column)

    grouped = split.groupBy("run_id", "operation").agg(
        sf.count(sf.lit(1)).alias("matched"),
        sf.sum(sf.when(measured, 1).otherwise(0)).cast("long").alias("requests"),
        mean("response_ms"),
        *[mean(column) for column in COMPONENT_COLUMNS],
    )
    return grouped.select(
        "run_id", "operation", "matched", "requests", "response_ms", *COMPONENT_COLUMNS
    )


def pool_by_config(rows: Iterable[Mapping[str, Any]], configs: Mapping[str, str]) -> tables.Table:
    """Request-weighted means over the runs of each configuration."""
    totals: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for row in rows:
        if not row["requests"]:
            continue
        cell = totals[(configs[row["run_id"]], row["operation"])]
        cell["requests"] += row["requests"]
        for column in ("response_ms", *COMPONENT_COLUMNS):
            cell[column] += row[column] * row["requests"]
    pooled = []
    for (config, operation), cell in sorted(totals.items()):
        n = cell["requests"]
        means = {c: cell[c] / n for c in ("response_ms", *COMPONENT_COLUMNS)}
        pooled.append({"config": config, "operation": operation, "requests": int(n), **means})
    return tables.from_records(
        "components",
        "Mean response time components per operation (ms)",
        pooled,
        COLUMNS,
        note="Components add up to the response time; network excludes the client's "
        "own encoding and decoding, which count as serialization.",
    )
