"""One aggregation over the client records: every count the pipeline takes of them.

The response-time histograms of the finest groupings (``response``), the completed
requests in each second of the measured interval (``throughput``) and the request
trace's histograms per window (``traces``) count the same records by other keys.
Here they are grouping sets of one hash aggregation after one scan (the records of
each whole run, with a ``measured`` key for the sets that keep the measured interval
only); ``Counts`` hands each consumer its rows as its own aggregation gave them.

    >>> counts = Counts(collected_rows, fine_sets)            # doctest: +SKIP
    >>> counts.response_cells()                                 # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as sf

from courier.analysis import response, tables, throughput, transforms, trimming

WINDOW, SECOND, MEASURED = "window", "second", "measured"


def count(
    requests: DataFrame,
    bounds: Iterable[trimming.Bounds],
    window_s: float,
    fine: Mapping[str, Sequence[str]],
) -> DataFrame:
    """The rows of every grouping set: ``fine`` (with ``measured``) and the trace's
    windows by response-time bucket, and completed requests per (run, second).

    Records outside their run's whole extent are counted under a null ``run_id``
    (``collect`` drops them): a filter would have Spark match every record's run id
    once per bound again (``transforms.with_run``)."""
    unkeyed = [name for name, keys in fine.items() if "run_id" not in keys]
    if unkeyed:  # collect would drop all their rows with those of no run
        raise ValueError(f"grouping sets without run_id: {unkeyed}")
    bounds = list(bounds)
    # Until the rows are named, outcome holds its code (transforms.outcome_code).
    located = requests.transform(transforms.with_run, bounds, "start_ns").withColumn(
        "outcome", transforms.outcome_code(sf.col("status"))
    )
    at = sf.col("start_ns")
    start = transforms.of_run([b.start_ns for b in bounds])
    keep_from = transforms.of_run([b.keep_from_ns for b in bounds])
    keep_until = transforms.of_run([b.keep_until_ns for b in bounds])
    window = sf.floor((at - start) / transforms.NS_PER_S / sf.lit(window_s)).cast("long")
    # Until the rows are named, run_id holds the run's index: a number hashes and
    # compares faster than a string in the aggregation's keys.
    keyed = located.select(
        *(c for c in requests.columns if c != "run_id"),
        sf.col(transforms.RUN).alias("run_id"),
        ((at >= keep_from) & (at < keep_until)).alias(MEASURED),
        window.alias(WINDOW),
        throughput.second(bounds, error=transforms.ERROR_CODE).alias(SECOND),
    )
    histogram_sets = {name: [*keys, MEASURED] for name, keys in fine.items()}
    histogram_sets[WINDOW] = ["run_id", WINDOW]
    # Two grains: what a request is (its groups) and when it ran (window and second).
    what = list(dict.fromkeys(k for keys in histogram_sets.values() for k in keys))
    bucket = response.BUCKET
    grains = [[k for k in what if k != WINDOW] + [bucket], ["run_id", WINDOW, SECOND, bucket]]
    plain = {SECOND: ["run_id", SECOND]}
    found = response.request_histograms(
        keyed, histogram_sets, plain, grains, transforms.OUTCOME_CODES
    )
    named = {
        "run_id": transforms.run_id_of([b.run_id for b in bounds], "run_id"),
        "outcome": transforms.outcome_named(sf.col("outcome")),
    }
    return found.select(*(named[c].alias(c) if c in named else c for c in found.columns))


def collect(found: DataFrame, fine: Mapping[str, Sequence[str]]) -> Counts:
    """``count``'s rows on the driver, without those of records outside every run."""
    return Counts([row for row in tables.collect(found) if row["run_id"] is not None], fine)


@dataclass(frozen=True)
class Counts:
    """The collected rows of ``count``, split by consumer."""

    rows: list[dict[str, Any]]
    fine: Mapping[str, Sequence[str]]

    def response_cells(self) -> list[dict[str, Any]]:
        """The fine sets' histogram rows of the measured requests."""
        return [
            {k: v for k, v in row.items() if k != MEASURED}
            for row in self.rows
            if row["grouping_set"] in self.fine and row[MEASURED]
        ]

    def window_cells(self) -> list[dict[str, Any]]:
        """Rows per run, window and bucket, as ``traces.finish_requests`` reads them."""
        return [row for row in self.rows if row["grouping_set"] == WINDOW]

    def seconds(self) -> list[dict[str, Any]]:
        """Completed requests (``completed``) per run and whole measured second."""
        return [
            {"run_id": row["run_id"], SECOND: row[SECOND], "completed": row["requests"]}
            for row in self.rows
            if row["grouping_set"] == SECOND and row[SECOND] is not None
        ]
