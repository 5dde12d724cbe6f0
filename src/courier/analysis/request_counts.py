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

from courier.analysis import response, throughput, transforms, trimming

WINDOW, SECOND, MEASURED = "window", "second", "measured"


def count(
    requests: DataFrame,
    bounds: Iterable[trimming.Bounds],
    window_s: float,
    fine: Mapping[str, Sequence[str]],
) -> DataFrame:
    """The rows of every grouping set: ``fine`` (with ``measured``) and the trace's
    windows by response-time bucket, and completed requests per (run, second)."""
    bounds = list(bounds)
    windowed = (
        requests.transform(transforms.within_run, bounds, "start_ns")
        .transform(transforms.with_run_time, bounds, "start_ns")
        .transform(transforms.with_window, window_s)
    )
    at = sf.col("start_ns")
    measured = (at >= transforms.bound(bounds, "keep_from_ns")) & (
        at < transforms.bound(bounds, "keep_until_ns")
    )
    keyed = windowed.select(
        *windowed.columns,
        measured.alias(MEASURED),
        throughput.second(bounds).alias(SECOND),
    )
    histogram_sets = {name: [*keys, MEASURED] for name, keys in fine.items()}
    histogram_sets[WINDOW] = ["run_id", WINDOW]
    # Two grains: what a request is (its groups) and when it ran (window and second).
    what = list(dict.fromkeys(k for keys in histogram_sets.values() for k in keys))
    bucket = response.BUCKET
    grains = [[k for k in what if k != WINDOW] + [bucket], ["run_id", WINDOW, SECOND, bucket]]
    plain = {SECOND: ["run_id", SECOND]}
    return response.request_histograms(keyed, histogram_sets, plain, grains)


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
