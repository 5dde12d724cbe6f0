"""What the report says: its sections, built from the results.

Writing a section also writes what it shows: each table as Parquet and CSV under
``tables/`` and each figure as PNG and SVG under ``plots/``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from courier.analysis import (
    factorial,
    findings,
    io,
    plots,
    report,
    tables,
    transforms,
    validity,
)
from courier.analysis.results import Results

TABLES_DIR = "tables"
PLOTS_DIR = "plots"

OUTCOMES = (
    "Outcomes: status OK is ok; QUEUE_EMPTY and NO_MESSAGE are misses, the normal answer "
    "of a read that found nothing, counted apart but included in the response-time "
    "figures; every other status is an error, counted and left out of them. "
    "Response times are client-side (call start to decoded reply), in milliseconds; "
    "ci_low/ci_high bound the 95% Student-t confidence interval of the mean."
)


RUN_LIST_COLUMNS = ("run_id", "config", "replication", "warmup_s", "cooldown_s")


class Writer:
    """Writes a report's tables and figures, returning the blocks that show them."""

    def __init__(self, report_dir: Path) -> None:
        self.report_dir = report_dir
        self.appendix: list[report.Block] = []
        self.saver = plots.Saver()

    def finish(self) -> None:
        """Wait until every figure is written."""
        self.saver.wait()

    def table(self, table: tables.Table) -> report.TableBlock:
        io.write_table(table, self.report_dir / TABLES_DIR)
        stem = f"{TABLES_DIR}/{table.name}"
        return report.TableBlock(table, f"{stem}.parquet", f"{stem}.csv")

    def to_appendix(self, *shown: tables.Table) -> None:
        """Write tables and show them in the appendix: raw numbers, after the findings."""
        self.appendix += [self.table(table) for table in shown]

    def figure(self, figure: Figure, stem: str, caption: str) -> report.FigureBlock:
        self.saver.save(figure, self.report_dir / PLOTS_DIR, stem)
        return report.FigureBlock(caption, f"{PLOTS_DIR}/{stem}.png", f"{PLOTS_DIR}/{stem}.svg")


def document(results: Results, writer: Writer) -> report.Document:
    experiment = results.inputs.experiment
    builders = (
        summary_section,
        runs_section,
        response_section,
        delivery_section,
        validity_section,
        trim_section,
        components_section,
        traces_section,
        factors_section,
        factorial_section,
    )
    sections = [build(results, writer) for build in builders]
    sections.append(appendix_section(results, writer))
    return report.Document(f"Courier experiment report: {experiment.name}", sections)


def summary_section(results: Results, writer: Writer) -> report.Section:
    inputs = results.inputs
    measured = sum(b.measured_s for b in inputs.bounds.values())
    blocks: list[report.Block] = [
        report.Paragraph(
            f"{len(inputs.bounds)} runs, {measured:.0f} s measured in all, "
            f"{sum(results.record_counts.values()):,} records."
        ),
        writer.table(findings.headline(results)),
        report.Paragraph(findings.validity_sentence(results)),
    ]
    blocks += [report.Paragraph(text) for text in findings.top_factors(results)]
    return report.Section("summary", "Summary", blocks)


def appendix_section(results: Results, writer: Writer) -> report.Section:
    inputs = results.inputs
    experiment = inputs.experiment
    runs = [
        {
            "run_id": r.run_id,
            "config": r.label(experiment.factor_names),
            "replication": r.replication,
            "warmup_s": r.warmup_s,
            "cooldown_s": r.cooldown_s,
        }
        for r in experiment.runs
    ]
    counts = [{"kind": k, "records": n} for k, n in results.record_counts.items()]
    blocks: list[report.Block] = [
        report.Paragraph(
            f"Directory: {experiment.directory}. "
            f"Git revision: {experiment.git_revision or 'unknown'}."
        ),
        report.Paragraph(
            "Factors: " + (json.dumps(experiment.factors) if experiment.factors else "none")
        ),
        writer.table(tables.from_records("run_list", "Runs", runs, RUN_LIST_COLUMNS)),
        writer.table(
            tables.from_records("record_counts", "Records read", counts, ("kind", "records"))
        ),
        report.Code(
            json.dumps(
                {
                    "spec": experiment.spec,
                    "machine": experiment.machine,
                    "packages": experiment.packages,
                },
                indent=2,
                default=str,
            )
        ),
    ]
    blocks += [report.Paragraph(note) for note in inputs.notes]
    return report.Section("appendix", "Appendix: experiment, tables and spec", [
        *blocks, *writer.appendix,
    ])  # fmt: skip


def trim_section(results: Results, writer: Writer) -> report.Section:
    how = (
        f"a fixed trim {results.trim} (seconds after each run's start)"
        if results.trim
        else "each run's warm-up and cool-down as the manifest marks them"
    )
    figure = plots.trim_overview(results.inputs.bounds, results.traces)
    return report.Section(
        "trim",
        "Measured interval",
        [
            report.Paragraph(
                f"Records outside the measured interval are dropped, using {how}. "
                "A request belongs to the interval in which it started."
            ),
            writer.figure(figure, "trim", "Throughput per window; grey regions were trimmed"),
        ],
    )


def runs_section(results: Results, writer: Writer) -> report.Section:
    return report.Section(
        "runs",
        "Runs",
        [
            report.Paragraph(
                "Throughput counts completed (ok and miss) requests per second of "
                "measured interval; its interval treats each whole second as one "
                "sample. " + OUTCOMES
            ),
            writer.table(results.runs.table),
        ],
    )


def response_section(results: Results, writer: Writer) -> report.Section:
    method = (
        "exact (linear interpolation between closest ranks)"
        if results.exact
        else "read off 1% logarithmic buckets (within 0.5% of the order statistic)"
    )
    blocks: list[report.Block] = [
        report.Paragraph(
            f"Percentiles are {method}. Miss statuses: {', '.join(transforms.MISS_STATUSES)}."
        )
    ]
    blocks.append(
        writer.figure(
            plots.latency_cdfs(results.latency_histograms, results.inputs.configs),
            "latency_cdf",
            "Response-time distribution per operation (cumulative, log time axis)",
        )
    )
    writer.to_appendix(*results.breakdowns.values())
    return report.Section("response", "Response time", blocks)


def components_section(results: Results, writer: Writer) -> report.Section:
    blocks: list[report.Block] = [
        report.Paragraph(
            "Client and server records of a request are joined on (run_id, client_id, "
            "request_id). queued: frame arrival to handler start; pool_wait: waiting for a "
            "database connection; db_exec: execution inside the database; db_rest: the rest "
            "of the database round trip; server_other: the rest of the server's time; "
            "serialization: encoding and decoding at client and server; network: client "
            "response time minus server total time, less the client's own codec time."
        ),
        report.Paragraph(results.components_note),
    ]
    if results.components is not None and len(results.components):
        writer.to_appendix(results.components)
        blocks.append(
            writer.figure(
                plots.component_bars(results.components),
                "components",
                "Mean response time components per operation",
            )
        )
    return report.Section("components", "Component breakdown", blocks)


def traces_section(results: Results, writer: Writer) -> report.Section:
    data = results.traces
    blocks: list[report.Block] = [
        report.Paragraph(
            f"Windows of {data.window_s:g} s over whole runs. GC pause time per window is "
            "overlaid on the response time (red bars) so that a spike can be matched to "
            "its cause; CPU is 100 per busy core. Each window's p99 response time is read "
            "off 1% logarithmic buckets (within 0.5% of the order statistic)."
        )
    ]
    configs = results.inputs.configs
    for run_id, bounds in results.inputs.bounds.items():
        figure = plots.run_trace(run_id, configs[run_id], bounds, data)
        blocks.append(writer.figure(figure, f"trace_{run_id}", f"Time trace of {run_id}"))
    writer.to_appendix(results.trim_table, *data.all())
    return report.Section("traces", "Time traces", blocks)


def factors_section(results: Results, writer: Writer) -> report.Section:
    levels = results.factors.levels
    if levels is None:
        return report.Section("factors", "Factors", [report.Paragraph(results.factors.note)])
    blocks: list[report.Block] = [
        report.Paragraph(
            "Each level pools every run at that level: throughput samples "
            "are seconds, response-time samples are requests."
        ),
    ]
    writer.to_appendix(levels)
    for factor in results.inputs.experiment.factor_names:
        blocks.append(
            writer.figure(
                plots.factor_levels(levels, factor),
                f"factor_{factor}",
                f"Throughput and response time against {factor}",
            )
        )
    return report.Section("factors", "Factors", blocks)


def factorial_section(results: Results, writer: Writer) -> report.Section:
    blocks: list[report.Block] = []
    if results.factors.analyses:
        blocks.append(
            report.Paragraph(
                "2^k r design: -1 is a factor's first declared level, +1 its second. Effects "
                "with 95% t intervals; an effect is significant when its interval excludes 0."
            )
        )
    if results.factors.note:
        blocks.append(report.Paragraph(results.factors.note))
    experiment = results.inputs.experiment
    for index, analysis in enumerate(results.factors.analyses):
        stem = f"factorial_{index}"
        blocks += [
            report.Paragraph(f"Response: {analysis.response}. " + _error_text(analysis)),
            writer.figure(
                plots.effects(analysis),
                f"{stem}_effects",
                f"Effects on {analysis.response} with 95% intervals",
            ),
            writer.figure(
                plots.variation(analysis),
                f"{stem}_variation",
                f"Allocation of variation: {analysis.response}",
            ),
        ]
        writer.to_appendix(
            _sign_table(analysis, experiment.factors, stem), _effects_table(analysis, stem)
        )
    return report.Section("factorial", "Factorial analysis", blocks)


def _error_text(analysis: factorial.Result) -> str:
    if analysis.error_std is None:
        return "One replication per combination: no error estimate, no intervals."
    return (
        f"r = {analysis.replications}; SSE = {analysis.sse:.4g}, SST = {analysis.sst:.4g}, "
        f"s_e = {analysis.error_std:.4g} with {analysis.error_dof} degrees of freedom; "
        f"error explains {100 * (analysis.error_variation or 0):.1f}% of the variation."
    )


def _sign_table(
    analysis: factorial.Result, declared: dict[str, list[Any]], stem: str
) -> tables.Table:
    rows = []
    for i, signs in enumerate(analysis.signs):
        row: dict[str, Any] = {"I": int(signs[0])}
        row |= {t: int(s) for t, s in zip(analysis.terms, signs[1:], strict=True)}
        row |= {f: str(declared[f][(i >> j) & 1]) for j, f in enumerate(analysis.factors)}
        row["y"] = ", ".join(f"{v:.4g}" for v in analysis.observations[i])
        row["mean_y"] = float(analysis.observations[i].mean())
        rows.append(row)
    letters = ", ".join(
        f"{factorial.letters(len(analysis.factors))[j]} = {f}"
        for j, f in enumerate(analysis.factors)
    )
    columns = ("I", *analysis.terms, *analysis.factors, "y", "mean_y")
    return tables.from_records(
        f"{stem}_signs", f"Sign table: {analysis.response} ({letters})", rows, columns
    )


def _effects_table(analysis: factorial.Result, stem: str) -> tables.Table:
    rows = [
        {
            "term": e.term,
            "effect": e.label,
            "estimate": e.estimate,
            "ci_low": e.ci_low,
            "ci_high": e.ci_high,
            "significant": e.significant,
            "variation_percent": None if e.variation is None else 100 * e.variation,
        }
        for e in analysis.effects
    ]
    if analysis.error_variation is not None:
        rows.append(
            {"term": "e", "effect": "error", "variation_percent": 100 * analysis.error_variation}
        )
    columns = (
        "term",
        "effect",
        "estimate",
        "ci_low",
        "ci_high",
        "significant",
        "variation_percent",
    )
    return tables.from_records(f"{stem}_effects", f"Effects: {analysis.response}", rows, columns)


def delivery_section(results: Results, writer: Writer) -> report.Section:
    found = results.delivery
    blocks: list[report.Block] = [
        report.Paragraph(
            "Each message a send stored is paired with the read that first took it "
            "(pop, receive, await_response; a peek leaves the message where it was), "
            "by the message ids in the client records. Messages never taken within the "
            "run are the backlog, listed apart; deliveries whose send has no record in the "
            "run are counted as unsent."
        )
    ]
    if found.levels is not None and any(found.levels.column("n")):
        for factor in results.inputs.experiment.factor_names:
            blocks.append(
                writer.figure(
                    plots.delivery_levels(found.levels, factor),
                    f"delivery_{factor}",
                    f"Delivery-time percentiles against {factor} (95% intervals)",
                )
            )
    blocks += [writer.table(found.groups["runs"]), writer.table(found.backlog)]
    writer.to_appendix(found.groups["queues"], found.groups["pairs"])
    if found.levels is not None:
        writer.to_appendix(found.levels)
    return report.Section("delivery", "Delivery time", blocks)


def validity_section(results: Results, writer: Writer) -> report.Section:
    judged = validity.judged_runs(results.validity)
    return report.Section(
        "validity",
        "Validity of saturation runs",
        [
            report.Paragraph(
                f"A saturation run is valid when its p90 delivery time is at most "
                f"{validity.MAX_P90_MS / 1000:g} s and its total queue depth shows no "
                "significant linear trend over the measured interval (slope t-test, 95%)."
            ),
            report.Paragraph(validity.SCOPE),
            report.Paragraph(_judged_text(judged, len(results.validity))),
            writer.table(results.validity),  # its note says how delivery time is approximated
        ],
    )


def _judged_text(judged: list[str], total: int) -> str:
    if not judged:
        return "Judged here: none (no run of this experiment is open-loop)."
    if len(judged) == total:
        return f"Judged here: all {total} runs (all are open-loop)."
    return f"Judged here: {', '.join(judged)} (open-loop); the other runs are closed-loop."
