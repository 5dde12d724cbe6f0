"""The pipeline's computations: prepared records in, small result tables out.

Each function runs a few Spark aggregations over ``inputs.Inputs`` and collects
only their results, which are one row per run, group or window.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import functions as sf

from courier.analysis import (
    component_sums,
    components,
    delivery_results,
    errors,
    factorial,
    factors,
    histograms,
    monitor,
    request_counts,
    response,
    stats,
    tables,
    throughput,
    traces,
    transforms,
    trimming,
    validity,
)
from courier.analysis.inputs import Inputs
from courier.measurements import record_schema

SUMMARY_COLUMNS = (*stats.COUNT_COLUMNS, *stats.SUMMARY_COLUMNS)


def trim_table(inputs: Inputs, trim: trimming.FixedTrim | None) -> tables.Table:
    how = f"fixed trim {trim}" if trim else "manifest warm-up/cool-down"
    rows = [
        {
            "run_id": run_id,
            "config": inputs.configs[run_id],
            "duration_s": b.duration_s,
            "keep_from_s": b.cut_start_s,
            "keep_until_s": b.cut_end_s,
            "measured_s": b.measured_s,
            "cut_by": how,
        }
        for run_id, b in inputs.bounds.items()
    ]
    columns = ("run_id", "config", "duration_s", "keep_from_s", "keep_until_s", "measured_s")
    return tables.from_records(
        "trim",
        "Measured interval of each run (seconds from the run's start)",
        rows,
        (*columns, "cut_by"),
    )


BREAKDOWNS = {
    "by_operation": (["operation"], "Response time by operation (ms)"),
    "by_status": (["operation", "status", "outcome"], "Requests by response status (ms)"),
    "by_instance": (["server"], "Response time by middleware instance (ms)"),
    "by_client": (["client_id"], "Response time by client (ms)"),
}

Summaries = dict[str, list[dict[str, Any]]]
DETAIL = ["run_id", "operation", "status", "outcome", "server"]
"""The grouping that holds every breakdown but the per-client one."""


KEY_SETS = {"runs": ["run_id"]} | {
    name: ["run_id", *keys] for name, (keys, _) in BREAKDOWNS.items()
}
# Spark groups by the finest sets only; the driver merges their few hundred buckets
# per group into the coarser sets (runs, by_operation, ...).
FINE_KEY_SETS = response.fine_key_sets({**KEY_SETS, "detail": DETAIL})


def count_requests(inputs: Inputs, window_s: float) -> request_counts.Counts:
    """Every count of the client records (response times, throughput per second, the
    request trace) from one Spark aggregation."""
    found = request_counts.count(inputs.requests, inputs.bounds.values(), window_s, FINE_KEY_SETS)
    return request_counts.collect(found, FINE_KEY_SETS)


def summaries(
    inputs: Inputs, exact: bool, counts: request_counts.Counts
) -> tuple[Summaries, list[dict[str, Any]]]:
    """Per-run and per-breakdown request summaries, by grouping set; and the
    response-time histograms per run and operation, which the report draws."""
    key_sets = KEY_SETS
    if exact:
        summary = inputs.measured.transform(stats.summarize_request_sets, key_sets, exact=True)
        rows = tables.collect(summary)
        distributions = latency_histograms(inputs)
    else:
        cells = response.refine(counts.response_cells(), FINE_KEY_SETS, key_sets)
        rows = response.finish_request_histograms(cells, key_sets)
        distributions = [
            {"run_id": c["run_id"], "operation": c["operation"], "bucket": c["bucket"],
             "n": c["n"]}
            for c in cells
            if c["grouping_set"] == "by_operation" and c["bucket"] is not None
        ]  # fmt: skip
    configs = inputs.configs
    found: Summaries = {name: [] for name in key_sets}
    for row in stats.with_confidence(rows):
        name = row.pop("grouping_set")
        keys = key_sets[name]
        kept = {k: v for k, v in row.items() if k in keys or k not in _ALL_KEYS}
        found[name].append({**kept, "config": configs[row["run_id"]]})
    for name, found_rows in found.items():
        keys = key_sets[name]
        found_rows.sort(key=lambda row: tuple(str(row[k]) for k in keys))
    return found, distributions


_ALL_KEYS = {"run_id", *(key for keys, _ in BREAKDOWNS.values() for key in keys)}


def response_tables(inputs: Inputs, found: Summaries) -> dict[str, tables.Table]:
    """Summaries per operation, status, middleware instance and client, per run."""
    result = {}
    for name, (keys, title) in BREAKDOWNS.items():
        columns = ("run_id", "config", *keys, *SUMMARY_COLUMNS)
        result[name] = tables.from_records(name, title, found[name], columns)
    return result


@dataclass(frozen=True)
class RunMetrics:
    """Per-run inputs of the factor and validity analyses."""

    table: tables.Table
    response: dict[str, stats.Moments]
    throughput: dict[str, stats.Moments]


def run_table(inputs: Inputs, found: Summaries, counts: request_counts.Counts) -> RunMetrics:
    """One row per run: counts, throughput with its interval, response-time statistics."""
    rows = found["runs"]
    if not rows:
        directory = inputs.experiment.directory
        raise errors.NoRecords(f"{directory}: no client request in a measured interval")
    sums = throughput.second_sums(counts.seconds())
    per_second = throughput.moments(sums, inputs.bounds)
    for row in rows:
        b = inputs.bounds[row["run_id"]]
        row["measured_s"] = b.measured_s
        row["throughput"] = (row["ok"] + row["misses"]) / b.measured_s
        seconds = per_second.get(row["run_id"])
        low, high = stats.t_interval(*_moments_args(seconds))
        row["throughput_ci_low"], row["throughput_ci_high"] = low, high
    columns = (
        "run_id",
        "config",
        "measured_s",
        "throughput",
        "throughput_ci_low",
        "throughput_ci_high",
        *SUMMARY_COLUMNS,
    )
    table = tables.from_records("runs", "Summary of each run (response times in ms)", rows, columns)
    response = {
        r["run_id"]: stats.Moments(r["n"], r["mean"], r["std"] or 0.0) for r in rows if r["n"]
    }
    return RunMetrics(table, response, per_second)


def _moments_args(moments: stats.Moments | None) -> tuple[float | None, float | None, int]:
    if moments is None:
        return None, None, 0
    return moments.mean, moments.std, moments.n


def breakdown_sums(inputs: Inputs) -> component_sums.Sums | None:
    """Per-group sums of every component; None without server records."""
    if record_schema.SERVER_REQUESTS not in inputs.present:
        return None
    server = inputs.frames[record_schema.SERVER_REQUESTS]
    ranges = inputs.id_ranges
    key = transforms.packed_key(list(inputs.bounds), ranges) if ranges else None
    return component_sums.field_sums(inputs.measured, server, key)


def component_table(
    inputs: Inputs, sums: component_sums.Sums | None, total_requests: int
) -> tuple[tables.Table | None, str]:
    """Mean components per configuration and operation; (None, why) without server records."""
    if sums is None:
        return None, "No server records: the component breakdown needs them."
    matched = sum(cell["matched"] for cell in sums.values())
    note = f"{matched} of {total_requests} measured requests matched a server record."
    return components.pool_by_config(sums, inputs.configs), note


def latency_histograms(inputs: Inputs) -> list[dict[str, Any]]:
    """Measured requests (errors left out) per run, operation and 1% bucket of response
    time: the distributions the report draws, a few hundred rows per operation."""
    measured = inputs.measured.where(sf.col("outcome") != transforms.ERROR)
    bucket = histograms.bucket(sf.col("latency_ms")).alias("bucket")
    grouped = measured.groupBy("run_id", "operation", bucket).agg(sf.count(sf.lit(1)).alias("n"))
    return tables.collect(grouped.select("run_id", "operation", "bucket", "n"))


TRACE_COLUMNS = {
    "requests": ("completed", "errors", "throughput", "mean_ms", "p99_ms"),
    "resources": ("process", "tier", "cpu_percent", "rss_mib"),
    "gc": ("process", "pauses", "pause_ms", "max_pause_ms"),
    "depth": ("messages",),
}
TRACE_TITLES = {
    "requests": "Requests per window",
    "resources": "CPU and RSS per process and window",
    "gc": "GC pauses per process and window",
    "depth": "Total queue depth per window",
}


Rows = list[dict[str, Any]]


def trace_tables(inputs: Inputs, window_s: float, counts: request_counts.Counts) -> traces.Traces:
    """Per-window traces over whole runs (warm-up and cool-down included): requests from
    the counts, the monitor kinds on the driver (``monitor``)."""
    monitors, bounds = inputs.monitors, list(inputs.bounds.values())

    def per_window(records: pa.Table, aggregate: Callable[[pa.Table], Rows]) -> Rows:
        return aggregate(monitor.windowed(records, bounds, window_s))

    rows = {
        "requests": traces.finish_requests(counts.window_cells()),
        "resources": per_window(monitors[record_schema.RESOURCES], monitor.resources_per_window),
        "gc": per_window(monitors[record_schema.GC_PAUSES], monitor.gc_per_window),
        "depth": per_window(inputs.depth_totals, monitor.depth_per_window),
    }
    started = {
        name: traces.with_start(found, inputs.bounds, window_s) for name, found in rows.items()
    }
    started["requests"] = traces.with_throughput(started["requests"], inputs.bounds, window_s)
    made = {
        name: tables.from_records(
            f"trace_{name}",
            TRACE_TITLES[name],
            started[name],
            ("run_id", "window", "t_s", *columns),
        )
        for name, columns in TRACE_COLUMNS.items()
    }
    return traces.Traces(window_s, made["requests"], made["resources"], made["gc"], made["depth"])


@dataclass(frozen=True)
class FactorResults:
    """Metrics against levels, and the 2^k r analyses when the design allows them."""

    levels: tables.Table | None
    analyses: list[factorial.Result]
    note: str


FACTORIAL_RESPONSES = {"throughput": "throughput (requests/s)", "mean": "mean response time (ms)"}


def factor_results(inputs: Inputs, runs: RunMetrics) -> FactorResults:
    experiment = inputs.experiment
    if not experiment.factors:
        return FactorResults(None, [], "The experiment varies no factor.")
    p99 = {row["run_id"]: row["p99"] for row in runs.table.records()}
    levels = factors.by_level(experiment, runs.response, runs.throughput, p99)
    analyses = []
    note = ""
    for column, measure in FACTORIAL_RESPONSES.items():
        values = {r["run_id"]: r[column] for r in runs.table.records() if r[column] is not None}
        observations, note = factorial.design_from_runs(experiment, values)
        if observations is not None:
            analyses.append(factorial.analyse(observations, experiment.factor_names, measure))
    return FactorResults(levels, analyses, note and f"No factorial analysis: {note}.")


def validity_table(inputs: Inputs, delivered: delivery_results.Delivery) -> tables.Table:
    """The saturation-run verdict of every run (n/a for closed-loop runs)."""
    depth_rows = monitor.depth_regressions(inputs.depth_totals, list(inputs.bounds.values()))
    arrivals = {run.run_id: run.arrival for run in inputs.experiment.runs}
    return validity.table(inputs.configs, arrivals, delivered.runs, depth_rows)


@dataclass(frozen=True)
class Results:
    """Everything the report shows, as small collected tables."""

    inputs: Inputs
    trim: trimming.FixedTrim | None
    window_s: float
    exact: bool
    record_counts: dict[str, int]
    trim_table: tables.Table
    runs: RunMetrics
    breakdowns: dict[str, tables.Table]
    components: tables.Table | None
    components_note: str
    traces: traces.Traces
    factors: FactorResults
    latency_histograms: list[dict[str, Any]]
    delivery: delivery_results.Delivery
    validity: tables.Table
