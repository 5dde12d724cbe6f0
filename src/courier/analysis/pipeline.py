"""``run``: analyse an experiment directory and write its report.

    >>> summary = run(Path("experiments/sweep"))            # doctest: +SKIP
    >>> summary.report_dir / "index.html"                    # doctest: +SKIP

The report goes to ``<experiment>/report/`` (or ``out``): index.html, report.md,
``plots/`` (PNG and SVG) and ``tables/`` (Parquet and CSV).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from courier.analysis import (
    cluster,
    content,
    delivery_results,
    errors,
    inputs,
    io,
    report,
    results,
    session,
    side_jobs,
    trimming,
)
from courier.measurements import manifest as manifest_

Progress = Callable[[str, int, int], None]
"""Called before each step with (description, steps done, steps in all)."""

REPORT_DIR = "report"
STEPS = (
    "Checking the manifest and record files",
    "Starting Spark",
    "Loading records",
    "Response times and throughput",
    "Component breakdown",
    "Time traces",
    "Delivery times, factors and validity",
    "Writing the report",
)


@dataclass(frozen=True)
class Summary:
    """What a pipeline run produced, for a closing table.

    Each of ``runs`` has ``judged`` (is it a saturation run?) and ``valid``
    (its verdict: None when not judged or when the data cannot decide).
    """

    experiment: str
    report_dir: Path
    runs: list[dict[str, Any]]
    records: int
    elapsed_s: float
    results: results.Results | None = None  # everything the report shows

    @property
    def records_per_second(self) -> float:
        return self.records / self.elapsed_s if self.elapsed_s > 0 else 0.0


class _Steps:
    def __init__(self, progress: Progress | None) -> None:
        self.progress = progress
        self.done = 0

    def next(self) -> None:
        if self.progress is not None:
            self.progress(STEPS[self.done], self.done, len(STEPS))
        self.done += 1

    def finish(self) -> None:
        if self.progress is not None:
            self.progress("Done", len(STEPS), len(STEPS))


def run(
    experiment_dir: Path,
    *,
    master: str = session.DEFAULT_MASTER,
    trim: trimming.FixedTrim | str | None = None,
    window_s: float = 5.0,
    out: Path | None = None,
    exact_percentiles: bool = False,
    progress: Progress | None = None,
    spark: SparkSession | None = None,
) -> Summary:
    """Analyse one experiment directory; raises errors.ExperimentError on bad input."""
    began = time.perf_counter()
    if window_s <= 0:
        raise errors.ExperimentError(f"window must be positive, got {window_s}")
    fixed = trimming.parse(trim) if isinstance(trim, str) else trim
    steps = _Steps(progress)
    steps.next()
    experiment = manifest_.load(Path(experiment_dir))
    files = io.discover(experiment)
    steps.next()
    if spark is not None:
        found = _analyse(spark, experiment, files, fixed, window_s, exact_percentiles, steps)
    else:
        with session.opened(master) as started:
            found = _analyse(started, experiment, files, fixed, window_s, exact_percentiles, steps)
    steps.next()
    report_dir = Path(out) if out is not None else experiment.directory / REPORT_DIR
    write_report(found, report_dir)
    steps.finish()
    return _summary(found, report_dir, time.perf_counter() - began)


def _analyse(
    spark: SparkSession,
    experiment: manifest_.Manifest,
    files: io.RecordFiles,
    trim: trimming.FixedTrim | None,
    window_s: float,
    exact: bool,
    steps: _Steps,
) -> results.Results:
    steps.next()
    cluster.check_visible(spark, experiment.directory)
    prepared = inputs.load(spark, experiment, files, trim)
    # The component sums and the delivery times need no other result: their queries
    # run beside the response-time ones, and keep the cores busy while the driver
    # plans the next query.
    with side_jobs.SideJobs(spark) as side:
        summing = side.submit(results.breakdown_sums, prepared)
        delivering = side.submit(delivery_results.compute, prepared)
        steps.next()
        counts = results.count_requests(prepared, window_s)
        found, distributions = results.summaries(prepared, exact, counts)
        runs = results.run_table(prepared, found, counts)
        breakdowns = results.response_tables(prepared, found)
        steps.next()
        requests = sum(runs.table.column("requests"))
        component_table, component_note = results.component_table(
            prepared, summing.result(), requests
        )
        steps.next()
        traces = results.trace_tables(prepared, window_s, counts)
        steps.next()
        delivered = delivering.result()
    return results.Results(
        inputs=prepared,
        trim=trim,
        window_s=window_s,
        exact=exact,
        record_counts=io.row_counts(files),
        trim_table=results.trim_table(prepared, trim),
        runs=runs,
        breakdowns=breakdowns,
        components=component_table,
        components_note=component_note,
        traces=traces,
        factors=results.factor_results(prepared, runs),
        latency_histograms=distributions,
        delivery=delivered,
        validity=results.validity_table(prepared, delivered),
    )


def write_report(found: results.Results, report_dir: Path) -> None:
    """Write index.html, report.md, tables and plots into ``report_dir``."""
    report_dir.mkdir(parents=True, exist_ok=True)
    writer = content.Writer(report_dir)
    try:
        document = content.document(found, writer)
    finally:
        writer.finish()
    (report_dir / "report.md").write_text(report.render_markdown(document), encoding="utf-8")
    (report_dir / "index.html").write_text(report.render_html(document), encoding="utf-8")


def _summary(found: results.Results, report_dir: Path, elapsed_s: float) -> Summary:
    verdicts = {row["run_id"]: row for row in found.validity.records()}
    runs = [
        {
            "run_id": row["run_id"],
            "config": row["config"],
            "requests": row["requests"],
            "errors": row["errors"],
            "throughput": row["throughput"],
            "mean_ms": row["mean"],
            "p50_ms": row["p50"],
            "p99_ms": row["p99"],
            "judged": verdicts[row["run_id"]]["judged"],
            "valid": verdicts[row["run_id"]]["valid"],
        }
        for row in found.runs.table.records()
    ]
    return Summary(
        experiment=found.inputs.experiment.name,
        report_dir=report_dir,
        runs=runs,
        records=sum(found.record_counts.values()),
        elapsed_s=elapsed_s,
        results=found,
    )
