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

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as sf

from courier.analysis import histograms, stats, transforms

BUCKET = "bucket"
GRAIN = "_grain"
SUMMED = (*stats.COUNT_COLUMNS, "n", "total_ns", "squares_ns")


def request_histograms(
    df: DataFrame,
    key_sets: Mapping[str, Sequence[str]],
    plain_sets: Mapping[str, Sequence[str]] | None = None,
    grains: Sequence[Sequence[str]] | None = None,
    outcomes: Sequence[str | int] = transforms.OUTCOMES,
) -> DataFrame:
    """Counts by outcome and response-time histograms of classified requests, for several
    groupings in one pass: a row per grouping set, group and bucket (errors, which have
    no latency, in a row whose bucket is null). ``plain_sets`` are counted without
    buckets, in the same pass. ``histograms.Histogram.of`` reads the rows of a group;
    ``finish_request_histograms`` turns them into summaries.

    With ``grains`` (key lists, each holding the keys of some of the sets), each record
    is counted once per grain, and every set is a regrouping of the small result of
    the first grain that holds its keys: fewer copies of every record go through the
    hash aggregation than one per set. ``outcomes`` are the values the ``outcome``
    column holds for ok, miss and error (``stats.count_exprs``)."""
    plain = dict(plain_sets or {})
    sets = {name: [*ks, BUCKET] for name, ks in key_sets.items()} | plain
    keys = list(dict.fromkeys(k for ks in sets.values() for k in ks if k != BUCKET))
    _, _, error = outcomes  # ok, miss, error: as stats.count_exprs reads them
    latency_ns = histograms.latency_ns(error=error)
    bucketed = df.select(
        *keys,
        *([] if "outcome" in keys else ["outcome"]),
        latency_ns.alias("latency_ns"),
        histograms.bucket_ns(latency_ns).alias(BUCKET),
    )
    counted = [
        *stats.count_exprs(outcomes),
        sf.count("latency_ns").alias("n"),
        *histograms.sums(sf.col("latency_ns"), exact=False),
    ]
    if grains:
        return _regrouped(bucketed, sets, [*keys, BUCKET], [list(g) for g in grains], counted)
    grouped = bucketed.groupingSets(list(sets.values()), *keys, BUCKET).agg(
        *counted, sf.grouping_id().alias("_id")
    )
    return _named(grouped, sets, [*keys, BUCKET])


def _named(grouped: DataFrame, sets: Mapping[str, Sequence[str]], keys: list[str]) -> DataFrame:
    names = stats.set_names(keys, sets)
    return grouped.select(names.alias("grouping_set"), *keys, *SUMMED)


def _regrouped(
    bucketed: DataFrame,
    sets: Mapping[str, Sequence[str]],
    keys: list[str],
    grains: list[list[str]],
    counted: list[Column],
) -> DataFrame:
    """``request_histograms`` in two aggregations: per grain, then per set of the
    grain rows; rows of a set regrouped from another grain's rows are dropped."""
    per_grain = bucketed.groupingSets(grains, *keys).agg(*counted, sf.grouping_id().alias(GRAIN))
    grain_of = {name: _grain_holding(grains, name, ks) for name, ks in sets.items()}
    with_grain = {name: [*ks, GRAIN] for name, ks in sets.items()}
    grouped = per_grain.groupingSets(list(with_grain.values()), *keys, GRAIN).agg(
        *[sf.sum(column).alias(column) for column in SUMMED], sf.grouping_id().alias("_id")
    )
    own = sf.lit(False)
    for name, grain in grain_of.items():
        in_set = sf.col("_id") == stats.grouping_id([*keys, GRAIN], with_grain[name])
        own = own | (in_set & (sf.col(GRAIN) == stats.grouping_id(keys, grain)))
    return _named(grouped.where(own), with_grain, [*keys, GRAIN]).drop(GRAIN)


def _grain_holding(grains: list[list[str]], name: str, keys: Sequence[str]) -> list[str]:
    for grain in grains:
        if set(keys) <= set(grain):
            return grain
    raise ValueError(f"no grain holds the keys of grouping set {name}: {list(keys)}")


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


FINE = "fine"


def fine_key_sets(key_sets: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """Fewer grouping sets for Spark: each set that another contains is left to the
    driver (``refine``), which merges the histograms of the larger set's groups."""
    kept = {name: list(keys) for name, keys in key_sets.items()}
    covered = {
        name
        for name, keys in kept.items()
        if any(set(keys) < set(other) for other in kept.values())
    }
    return {name: keys for name, keys in kept.items() if name not in covered}


def refine(
    cells: Iterable[Mapping[str, Any]],
    fine: Mapping[str, Sequence[str]],
    key_sets: Mapping[str, Sequence[str]],
) -> list[dict[str, Any]]:
    """The rows of every set of ``key_sets``, from those of the ``fine`` sets: a set
    Spark did not group by takes its rows from a fine set that contains its keys."""
    cells = list(cells)
    refined = []
    for name, keys in key_sets.items():
        source = name if name in fine else _containing(fine, keys)
        for cell in cells:
            if cell["grouping_set"] == source:
                refined.append({**cell, "grouping_set": name})
    return refined


def _containing(fine: Mapping[str, Sequence[str]], keys: Sequence[str]) -> str:
    return next(name for name, found in fine.items() if set(keys) <= set(found))
