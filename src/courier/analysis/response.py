"""Response-time summaries from histograms: every grouping in one hash aggregation.

``request_histograms`` counts the classified requests of every grouping set by
outcome and by 1% bucket of response time (``courier.analysis.histograms``), with
exact sums for the moments; ``finish_request_histograms`` reads each group's
count, mean, standard deviation and percentiles off its rows on the driver. The
same rows give the response-time distributions the report draws.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as sf

from courier.analysis import histograms, stats, transforms


def request_histograms(df: DataFrame, key_sets: Mapping[str, Sequence[str]]) -> DataFrame:
    """Counts by outcome and response-time histograms of classified requests, for several
    groupings in one pass: a row per grouping set, group and bucket (errors, which have
    no latency, in a row whose bucket is null). ``histograms.Histogram.of`` reads the
    rows of a group; ``finish_request_histograms`` turns them into summaries."""
    keys = list(dict.fromkeys(key for keys in key_sets.values() for key in keys))
    latency_ns = sf.when(sf.col("outcome") != transforms.ERROR, sf.col("response_ns"))
    bucketed = df.select(
        *keys,
        "outcome",
        latency_ns.alias("latency_ns"),
        sf.when(latency_ns.isNotNull(), histograms.bucket(latency_ns / transforms.NS_PER_MS)).alias(
            "bucket"
        ),
    )
    grouped = bucketed.groupingSets(
        [[*k, "bucket"] for k in key_sets.values()], *keys, "bucket"
    ).agg(
        *stats.count_exprs(),
        sf.count("latency_ns").alias("n"),
        *histograms.sums(sf.col("latency_ns"), exact=False),
        sf.grouping_id().alias("_id"),
    )
    names = histograms.grouping_names(keys, key_sets)
    return grouped.select(
        names.alias("grouping_set"), *keys, "bucket", *stats.COUNT_COLUMNS, "n", "total_ns",
        "squares_ns",
    )  # fmt: skip


def finish_request_histograms(
    rows: Iterable[Mapping[str, Any]], key_sets: Mapping[str, Sequence[str]]
) -> list[dict[str, Any]]:
    """One summary row per grouping set and group: counts, moments, percentiles."""
    cells: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for row in rows:
        name = row["grouping_set"]
        cells.setdefault((name, *(row[k] for k in key_sets[name])), []).append(row)
    finished = []
    for (name, *key), group in cells.items():
        found: dict[str, Any] = {
            "grouping_set": name,
            **dict(zip(key_sets[name], key, strict=True)),
        }
        found |= {column: sum(int(c[column]) for c in group) for column in stats.COUNT_COLUMNS}
        histogram = histograms.Histogram.of(c for c in group if c["bucket"] is not None)
        moments = histogram.moments()
        found["n"] = histogram.n
        found["mean"] = moments.mean if moments else None
        found["std"] = moments.std if moments and moments.n > 1 else None
        for label, p in stats.PERCENTILES.items():
            found[label] = histogram.quantile(p)[0] if histogram.n else None
        finished.append(found)
    return finished
