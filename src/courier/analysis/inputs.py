"""The experiment's records as DataFrames, ready for the computations.

``load`` reads the request kinds and fixes each run's measured interval; the
monitor kinds come to the driver as Arrow tables when first used (``monitor``).
Nothing is cached: each aggregation scans only the Parquet columns it needs, which costs
less than building an in-memory cache of the records. The bounds reach Spark as
literals (``transforms.bound``, ``transforms.of_run``), not as a table to join.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

from courier.analysis import errors, io, monitor, transforms, trimming
from courier.measurements import manifest as manifest_
from courier.measurements import record_schema


@dataclass
class Inputs:
    """The experiment's records as DataFrames, with each run's measured interval."""

    spark: SparkSession
    experiment: manifest_.Manifest
    frames: dict[str, DataFrame]
    present: set[str]
    bounds: dict[str, trimming.Bounds]
    requests: DataFrame  # classified client requests, whole runs
    measured: DataFrame  # the same, trimmed to the measured intervals
    notes: list[str] = field(default_factory=list)
    files: io.RecordFiles = field(default_factory=dict)
    id_ranges: io.Ranges | None = None  # client and request ids, client and server records

    @property
    def configs(self) -> dict[str, str]:
        names = self.experiment.factor_names
        return {r.run_id: r.label(names) for r in self.experiment.runs if r.run_id in self.bounds}

    @functools.cached_property
    def monitors(self) -> dict[str, pa.Table]:
        """The monitor kinds' records on the driver (``monitor``), read when first used."""
        return monitor.read(self.files)

    @functools.cached_property
    def depth_totals(self) -> pa.Table:
        """Messages in all queues at each queue-depth sample (``monitor.total_queue_depth``):
        the depth trace and the validity verdict both read them."""
        return monitor.total_queue_depth(self.monitors[record_schema.QUEUE_DEPTHS])


def load(
    spark: SparkSession,
    experiment: manifest_.Manifest,
    files: io.RecordFiles,
    trim: trimming.FixedTrim | None,
) -> Inputs:
    """Read the kinds Spark reads (``SPARK_KINDS``) and fix each run's measured interval."""
    if not files[record_schema.CLIENT_REQUESTS]:
        raise errors.NoRecords(f"{experiment.directory}: no client_requests files in any run")
    frames = {kind: io.read(spark, kind, files[kind]) for kind in SPARK_KINDS}
    present = {kind for kind, paths in files.items() if paths}
    requests = frames[record_schema.CLIENT_REQUESTS].transform(transforms.classify)
    notes: list[str] = []
    bounds = _bounds(experiment, requests, trim, notes)
    measured = requests.transform(transforms.trim, list(bounds.values()), "start_ns")
    ranges = io.id_ranges(files, REQUEST_KINDS, ("client_id", "request_id"))
    return Inputs(
        spark, experiment, frames, present, bounds, requests, measured, notes, files, ranges
    )


REQUEST_KINDS = (record_schema.CLIENT_REQUESTS, record_schema.SERVER_REQUESTS)
SPARK_KINDS = (*REQUEST_KINDS, record_schema.QUEUE_DEPTHS)
"""The kinds read into Spark: the requests, and the queue depths for the benchmark's
per-queue regression (``benchmark``). A DataFrame costs a fresh session a tenth of
a second or more to set up, so kinds nothing reads with Spark get none."""


def _bounds(
    experiment: manifest_.Manifest,
    requests: DataFrame,
    trim: trimming.FixedTrim | None,
    notes: list[str],
) -> dict[str, trimming.Bounds]:
    """Each run's bounds; a run without start/end marks takes its records' extent."""
    unmarked = [r.run_id for r in experiment.runs if r.start_ns is None or r.end_ns is None]
    extents = _extents(requests, unmarked) if unmarked else {}
    bounds = {}
    for run in experiment.runs:
        if run.start_ns is not None and run.end_ns is not None:
            bounds[run.run_id] = trimming.bounds_for(run, run.start_ns, run.end_ns, trim)
        elif run.run_id in extents:
            notes.append(f"{run.run_id}: no start/end in the manifest; used its records' extent")
            bounds[run.run_id] = trimming.bounds_for(run, *extents[run.run_id], trim)
        else:
            notes.append(f"{run.run_id}: no start/end in the manifest and no records; skipped")
    return bounds


def _extents(requests: DataFrame, run_ids: list[str]) -> dict[str, tuple[int, int]]:
    end = sf.col("start_ns") + sf.col("response_ns")
    rows = (
        requests.where(sf.col("run_id").isin(*run_ids))
        .groupBy("run_id")
        .agg(sf.min("start_ns").alias("first"), (sf.max(end) + 1).alias("last"))
        .collect()
    )
    return {row["run_id"]: (int(row["first"]), int(row["last"])) for row in rows}
