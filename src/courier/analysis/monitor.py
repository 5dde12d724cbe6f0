"""The monitor records on the driver: CPU, RSS, GC and queue-depth traces, and the
queue-depth regression of the validity verdict, computed with Arrow.

Monitors sample at a fixed rate (each process, or each queue, once a second), so
these kinds hold thousands of rows per run, or tens of thousands with many queues,
whatever the load, where the request kinds hold millions. The driver already
reads every record file's footer (``io.check_file``); reading these rows too
costs milliseconds, where a Spark query per trace cost its plan and its generated
code: about 3 s of CPU in a fresh session, most of a second of a run
(docs/measurements.md, "Pipeline speed").

Windows and run times are those of the Spark steps: window ``w`` of a run holds
the instants ``t`` with ``w <= (t - start) / window_s < w + 1``, seconds counted in
doubles as Spark counts them.

    >>> tables = read(files, [record_schema.RESOURCES])          # doctest: +SKIP
    >>> resources_per_window(windowed(tables[...], bounds, 5.0))  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from courier.analysis import errors, transforms, trimming
from courier.measurements import record_schema

KINDS = (record_schema.RESOURCES, record_schema.GC_PAUSES, record_schema.QUEUE_DEPTHS)
"""The monitor kinds the pipeline reads on the driver."""
INSTANT = "ts_ns"
"""Every monitor record's instant."""
WINDOW, T_S = "window", "t_s"
MIB = 2**20

Rows = list[dict[str, Any]]


def read(files: dict[str, list[Path]], kinds: Iterable[str] = KINDS) -> dict[str, pa.Table]:
    """Each kind's records from all its files, with the contract's columns (checked
    by ``io.discover`` already); a kind without files is an empty table."""
    found = {}
    for kind in kinds:
        schema = record_schema.arrow_schema(kind)
        parts = [_read_file(path, schema) for path in files[kind]]
        found[kind] = pa.concat_tables(parts) if parts else schema.empty_table()
    return found


def _read_file(path: Path, schema: pa.Schema) -> pa.Table:
    try:
        return pq.read_table(path, columns=schema.names).cast(schema)
    except (OSError, ValueError, pa.ArrowException) as exc:  # a null in a field, say
        raise errors.RecordFileError(path, f"cannot be read as {schema.names}: {exc}") from exc


def timed(records: pa.Table, bounds: Iterable[trimming.Bounds], first: str, last: str) -> pa.Table:
    """The records with ``first <= ts_ns < last`` of their run's bounds (a record of a
    run without bounds is left out), with ``t_s``: seconds since the run's start."""
    parts = []
    for b in bounds:
        of_run = _of_run(records, b.run_id)
        at = of_run[INSTANT].to_numpy()
        inside = (at >= getattr(b, first)) & (at < getattr(b, last))
        seconds = (at[inside] - b.start_ns) / transforms.NS_PER_S
        chosen = of_run.filter(pa.array(inside))
        parts.append(chosen.append_column(T_S, pa.array(seconds, pa.float64())))
    if not parts:
        return records.schema.empty_table().append_column(T_S, pa.array([], pa.float64()))
    return pa.concat_tables(parts)


def windowed(records: pa.Table, bounds: Iterable[trimming.Bounds], window_s: float) -> pa.Table:
    """The records within their run's whole extent, with ``t_s`` and ``window``."""
    found = timed(records, bounds, "start_ns", "end_ns")
    window = np.floor(found[T_S].to_numpy() / window_s).astype(np.int64)
    return found.append_column(WINDOW, pa.array(window, pa.int64()))


def resources_per_window(records: pa.Table) -> Rows:
    """Mean CPU and peak RSS (MiB) of each process per run and window."""
    keys = ["run_id", "process", "tier", WINDOW]
    grouped = records.group_by(keys, use_threads=False).aggregate(
        [("cpu_percent", "mean"), ("rss_bytes", "max")]
    )
    return [
        {**_keys(row, keys), "cpu_percent": row["cpu_percent_mean"],
         "rss_mib": row["rss_bytes_max"] / MIB}
        for row in grouped.to_pylist()
    ]  # fmt: skip


def gc_per_window(records: pa.Table) -> Rows:
    """Number, total and longest GC pause (ms) of each process per run and window."""
    keys = ["run_id", "process", WINDOW]
    grouped = records.group_by(keys, use_threads=False).aggregate(
        [("duration_ns", "count"), ("duration_ns", "sum"), ("duration_ns", "max")]
    )
    return [
        {**_keys(row, keys), "pauses": row["duration_ns_count"],
         "pause_ms": row["duration_ns_sum"] / transforms.NS_PER_MS,
         "max_pause_ms": row["duration_ns_max"] / transforms.NS_PER_MS}
        for row in grouped.to_pylist()
    ]  # fmt: skip


def depth_per_window(totals: pa.Table) -> Rows:
    """Mean total queue depth per run and window (of ``total_queue_depth``'s rows)."""
    keys = ["run_id", WINDOW]
    grouped = totals.group_by(keys, use_threads=False).aggregate([("messages", "mean")])
    return [{**_keys(row, keys), "messages": row["messages_mean"]} for row in grouped.to_pylist()]


def total_queue_depth(depths: pa.Table) -> pa.Table:
    """Messages in all queues together at each sample instant of each run."""
    keys = ["run_id", INSTANT]
    grouped = depths.group_by(keys, use_threads=False).aggregate([("messages", "sum")])
    return grouped.select([*keys, "messages_sum"]).rename_columns([*keys, "messages"])


def depth_regressions(
    totals: pa.Table, bounds: Sequence[trimming.Bounds]
) -> dict[str, dict[str, Any]]:
    """Per run, the aggregates of ``stats.slope_test`` (total depth on ``t_s``) over
    the measured interval: n, means, sample variances and covariance. A run without
    samples there has no row."""
    found = {}
    for b in bounds:
        of_run = timed(totals, [b], "keep_from_ns", "keep_until_ns")
        if of_run.num_rows:
            found[b.run_id] = _regression(
                of_run[T_S].to_numpy(), of_run["messages"].to_numpy().astype(np.float64)
            )
    return found


def _regression(x: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """What Spark's count, avg, var_samp and covar_samp give (null variances below two)."""
    n = len(x)
    spread = n > 1
    return {
        "n": n,
        "mean_x": float(x.mean()),
        "mean_y": float(y.mean()),
        "var_x": float(x.var(ddof=1)) if spread else None,
        "var_y": float(y.var(ddof=1)) if spread else None,
        "cov_xy": float(np.cov(x, y, ddof=1)[0, 1]) if spread else None,
    }


def _of_run(records: pa.Table, run_id: str) -> pa.Table:
    return records.filter(pc.equal(records["run_id"], pa.scalar(run_id)))


def _keys(row: dict[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    return {key: row[key] for key in keys}
