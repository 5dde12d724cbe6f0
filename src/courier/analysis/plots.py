"""Figures of the report, drawn with matplotlib's object API (no pyplot state).

Every figure is saved as PNG and SVG under one stem; functions take collected
result tables (plain Python values), never DataFrames. ``Saver`` renders figures
in forked processes, two at a time, while the report goes on being built.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import numpy as np
from matplotlib import ticker
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.figure import Figure

from courier.analysis import components, factorial, histograms, tables, traces, trimming

FORMATS = ("png", "svg")
DPI = 110
TRIMMED_COLOUR = "0.85"


def save(figure: Figure, directory: Path, stem: str) -> list[Path]:
    """Write the figure in every format; returns the paths (PNG first).

    Every figure has constrained layout, which fits it to its size, so it is saved
    whole rather than cropped to a tight box (finding that box draws it once more).
    The first format's drawing lays it out; the others keep that layout.
    """
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / f"{stem}.{fmt}" for fmt in FORMATS]
    engine = figure.get_layout_engine()
    try:
        # Text stays text in the SVGs: searchable, editable and quicker than glyph
        # outlines; a viewer without DejaVu Sans shows another sans-serif font.
        with matplotlib.rc_context({"svg.fonttype": "none"}):
            for path in paths:
                figure.savefig(path, dpi=DPI)
                figure.set_layout_engine("none")
    finally:
        figure.set_layout_engine(engine)
    return paths


class Saver:
    """Saves figures in forked child processes, at most ``workers`` at once.

    Rendering a figure (PNG and SVG) takes far longer than building it, and Spark
    is idle while the report is written, so the driver builds the next figure while
    children render. ``wait`` returns once every figure is on disk; a figure whose
    child failed is saved again in this process, which raises its error. Without
    ``os.fork`` figures are saved in this process.
    """

    def __init__(self, workers: int = 2) -> None:
        self.workers = workers
        self.pending: dict[int, tuple[Figure, Path, str]] = {}

    def save(self, figure: Figure, directory: Path, stem: str) -> list[Path]:
        if not hasattr(os, "fork") or self.workers < 1:
            return save(figure, directory, stem)
        directory.mkdir(parents=True, exist_ok=True)
        while len(self.pending) >= self.workers:
            self._reap_oldest()
        pid = os.fork()
        if pid == 0:  # the child: render, and leave without running any exit handler
            code = 1
            try:
                save(figure, directory, stem)
                code = 0
            finally:
                os._exit(code)
        self.pending[pid] = (figure, directory, stem)
        return [directory / f"{stem}.{fmt}" for fmt in FORMATS]

    def wait(self) -> None:
        while self.pending:
            self._reap_oldest()

    def _reap_oldest(self) -> None:
        """Wait for the oldest child (by its pid: other children are not ours to reap)."""
        pid = next(iter(self.pending))
        job = self.pending.pop(pid)
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            save(*job)


class _PlainLogFormatter(ticker.LogFormatter):
    """The log formatter's choice of ticks to label, printed plainly: 0.2, 1, 50."""

    def __call__(self, x: float, pos: int | None = None) -> str:
        return f"{x:g}" if super().__call__(x, pos) else ""


def _plain_log_labels(axis: Axis) -> None:
    """Label a log axis 0.2, 1, 50 rather than 2 x 10^-1: the scientific labels are wide
    enough to overlap on a narrow axis, and laying out their mathtext is slow."""
    axis.set_major_formatter(_PlainLogFormatter())
    axis.set_minor_formatter(_PlainLogFormatter(labelOnlyBase=False))


def _shade_trimmed(axes: Sequence[Axes], bounds: trimming.Bounds) -> None:
    for ax in axes:
        ax.axvspan(0, bounds.cut_start_s, color=TRIMMED_COLOUR, zorder=0)
        ax.axvspan(bounds.cut_end_s, bounds.duration_s, color=TRIMMED_COLOUR, zorder=0)
        ax.set_xlim(0, bounds.duration_s)


def _steps(ax: Axes, xs: list[float], ys: list[Any], window_s: float, **style: Any) -> None:
    """Window values as steps, the last one drawn to its window's end."""
    if xs:
        ax.step([*xs, xs[-1] + window_s], [*ys, ys[-1]], where="post", **style)


def _by_process(rows: list[dict[str, Any]], value: str) -> dict[str, tuple[list[Any], list[Any]]]:
    series: dict[str, tuple[list[Any], list[Any]]] = defaultdict(lambda: ([], []))
    for row in rows:
        xs, ys = series[row["process"]]
        xs.append(row["t_s"])
        ys.append(row[value])
    return dict(series)


def run_trace(run_id: str, title: str, bounds: trimming.Bounds, data: traces.Traces) -> Figure:
    """Throughput, response time with GC pauses, CPU, RSS and queue depth of one run."""
    requests = data.requests.where(run_id=run_id)
    depth = data.depth.where(run_id=run_id)
    panels = 5 if depth else 4
    figure = Figure(figsize=(9, 2.0 * panels), layout="constrained")
    axes = figure.subplots(panels, 1, sharex=True)
    t, window = [r["t_s"] for r in requests], data.window_s
    _steps(axes[0], t, [r["throughput"] for r in requests], window)
    axes[0].set_ylabel("requests/s")
    _steps(axes[1], t, [r["mean_ms"] for r in requests], window, label="mean")
    _steps(axes[1], t, [r["p99_ms"] for r in requests], window, label="p99")
    axes[1].set_ylabel("response (ms)")
    _gc_overlay(axes[1], data.gc.where(run_id=run_id), data.window_s)
    axes[1].legend(loc="upper left", fontsize="small")
    resources = data.resources.where(run_id=run_id)
    _process_lines(axes[2], resources, "cpu_percent", "CPU (%)", window)
    _process_lines(axes[3], resources, "rss_mib", "RSS (MiB)", window)
    if depth:
        _steps(axes[4], [r["t_s"] for r in depth], [r["messages"] for r in depth], window)
        axes[4].set_ylabel("queued messages")
    axes[-1].set_xlabel(f"seconds since run start ({data.window_s:g} s windows; grey = trimmed)")
    for ax in axes:
        _from_zero(ax)
    _shade_trimmed(axes, bounds)
    figure.suptitle(f"{run_id}: {title}")
    return figure


def _from_zero(ax: Axes, headroom: float = 1.3) -> None:
    """Start the y axis at zero, with room at the top for the legend.

    From zero, a 5% change looks like one rather than filling the panel.
    """
    top = ax.get_ylim()[1]
    ax.set_ylim(0, top * headroom if top > 0 else 1.0)


def _gc_overlay(ax: Axes, rows: list[dict[str, Any]], window_s: float) -> None:
    """GC pause time per window as bars on a second axis, to line up with latency."""
    if not rows:
        return
    pauses: dict[float, float] = defaultdict(float)
    for row in rows:
        pauses[row["t_s"]] += row["pause_ms"]
    twin = ax.twinx()
    twin.bar(
        list(pauses),
        list(pauses.values()),
        width=window_s,
        align="edge",
        color="tab:red",
        alpha=0.25,
        label="GC pause",
    )
    twin.set_ylabel("GC pause (ms)", color="tab:red")
    _from_zero(twin)


def _process_lines(
    ax: Axes, rows: list[dict[str, Any]], value: str, label: str, window_s: float
) -> None:
    for process, (xs, ys) in sorted(_by_process(rows, value).items()):
        _steps(ax, xs, ys, window_s, label=process)
    ax.set_ylabel(label)
    if rows:
        ax.legend(loc="upper left", fontsize="x-small", ncols=3)


def component_bars(table: tables.Table) -> Figure:
    """Stacked mean components per configuration, one panel per operation."""
    operations = sorted(set(table.column("operation")))
    figure = Figure(figsize=(max(4.0, 3.2 * len(operations)), 4.2), layout="constrained")
    # One y scale for all panels, so operations compare at a glance.
    axes = figure.subplots(1, len(operations), squeeze=False, sharey=True)[0]
    for ax, operation in zip(axes, operations, strict=True):
        rows = table.where(operation=operation)
        labels = [row["config"].replace(", ", "\n") for row in rows]
        bottom = [0.0] * len(rows)
        for column in components.COMPONENT_COLUMNS:
            heights = [max(row[column], 0.0) for row in rows]
            ax.bar(labels, heights, bottom=bottom, label=column.removesuffix("_ms"))
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
        ax.set_title(operation)
        ax.tick_params(axis="x", labelsize="small")
    axes[0].set_ylabel("mean time (ms)")
    axes[-1].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    return figure


def factor_levels(table: tables.Table, factor: str) -> Figure:
    """Throughput and mean response time against the levels of one factor, CI bands."""
    rows = table.where(factor=factor)
    figure = Figure(figsize=(10, 4), layout="constrained")
    left, right = figure.subplots(1, 2)
    _band(left, rows, "throughput", "throughput_ci_low", "throughput_ci_high")
    left.set_ylabel("throughput (requests/s)")
    _band(right, rows, "response_ms", "response_ci_low", "response_ci_high")
    right.set_ylabel("mean response time (ms)")
    for ax in (left, right):
        ax.set_xlabel(factor)
    figure.suptitle(f"Metrics against {factor} (shaded: 95% confidence interval)")
    return figure


def _band(ax: Axes, rows: list[dict[str, Any]], value: str, low: str, high: str) -> None:
    """A value per level as a line, its interval as a band (levels evenly spaced)."""
    points = [r for r in rows if r[value] is not None]
    xs = list(range(len(points)))
    ax.plot(xs, [r[value] for r in points], marker="o")
    lows = [r[low] if r[low] is not None else r[value] for r in points]
    highs = [r[high] if r[high] is not None else r[value] for r in points]
    ax.fill_between(xs, lows, highs, alpha=0.25)
    ax.set_xticks(xs, [r["level"] for r in points])
    ax.set_ylim(bottom=0)


def effects(result: factorial.Result) -> Figure:
    """Each effect of a factorial analysis with its 95% interval; zero marked."""
    terms = [e for e in result.effects if e.term != "I"]
    figure = Figure(figsize=(8, 0.55 * len(terms) + 1.5), layout="constrained")
    ax = figure.subplots()
    ys = list(range(len(terms)))
    below = [e.estimate - e.ci_low if e.ci_low is not None else 0.0 for e in terms]
    above = [e.ci_high - e.estimate if e.ci_high is not None else 0.0 for e in terms]
    ax.errorbar([e.estimate for e in terms], ys, xerr=[below, above], fmt="o", capsize=4)
    ax.axvline(0.0, color="0.4", linewidth=1)
    ax.set_yticks(ys, [e.label for e in terms])
    ax.invert_yaxis()
    ax.set_xlabel(f"effect on {result.response} (half the change from low to high level)")
    ax.set_title(f"Effects on {result.response} (95% intervals)")
    return figure


def latency_cdfs(rows: list[dict[str, Any]], configs: dict[str, str]) -> Figure:
    """The response-time distribution of each operation, one line per configuration."""
    counts: dict[str, dict[str, dict[int, int]]] = defaultdict(lambda: defaultdict(dict))
    for row in rows:
        cell = counts[row["operation"]][configs.get(row["run_id"], row["run_id"])]
        cell[row["bucket"]] = cell.get(row["bucket"], 0) + row["n"]
    operations = sorted(counts)
    columns = min(3, max(len(operations), 1))
    lines = -(-max(len(operations), 1) // columns)
    figure = Figure(figsize=(4.2 * columns, 3.4 * lines + 0.6), layout="constrained")
    axes = figure.subplots(lines, columns, squeeze=False).ravel()
    for ax, operation in zip(axes, operations, strict=False):
        for config, buckets in sorted(counts[operation].items()):
            ordered = sorted(buckets)
            total = sum(buckets.values())
            ys = np.cumsum([buckets[b] for b in ordered]) / total
            ax.step(histograms.bucket_value(np.array(ordered)), ys, where="post", label=config)
        ax.set_xscale("log")
        _plain_log_labels(ax.xaxis)
        ax.set_ylim(0, 1.02)
        ax.set_title(operation)
        ax.grid(True, alpha=0.3)
    for ax in axes[len(operations) :]:
        ax.set_visible(False)
    if operations:
        axes[0].legend(loc="lower right", fontsize="small")
    figure.supxlabel("response time (ms, log scale)")
    figure.supylabel("fraction of requests")
    return figure


def variation(result: factorial.Result) -> Figure:
    """Allocation of variation of one factorial analysis, error included."""
    effects = [e for e in result.effects if e.variation is not None]
    labels = [e.label for e in effects]
    shares = [100 * (e.variation or 0.0) for e in effects]
    if result.error_variation is not None:
        labels.append("error")
        shares.append(100 * result.error_variation)
    figure = Figure(figsize=(6, 0.5 * len(labels) + 1.2), layout="constrained")
    ax = figure.subplots()
    ax.barh(labels, shares)
    ax.invert_yaxis()
    ax.set_xlabel("variation explained (%)")
    ax.set_title(f"Allocation of variation: {result.response}")
    return figure


def trim_overview(bounds: dict[str, trimming.Bounds], data: traces.Traces) -> Figure:
    """Throughput trace of every run with its trimmed warm-up and cool-down shaded."""
    run_ids = list(bounds)
    columns = min(3, len(run_ids))
    rows = -(-len(run_ids) // columns)
    figure = Figure(figsize=(3.6 * columns, 2.2 * rows + 0.6), layout="constrained")
    axes = figure.subplots(rows, columns, squeeze=False).ravel()
    for ax, run_id in zip(axes, run_ids, strict=False):
        points = data.requests.where(run_id=run_id)
        xs, ys = [p["t_s"] for p in points], [p["throughput"] for p in points]
        _steps(ax, xs, ys, data.window_s)
        _shade_trimmed([ax], bounds[run_id])
        ax.set_title(run_id, fontsize="small")
        ax.set_ylim(0, 1.15 * max(ys, default=1.0) or 1.0)
    for ax in axes[len(run_ids) :]:
        ax.set_visible(False)
    figure.supxlabel("seconds since run start (grey = trimmed)")
    figure.supylabel("requests/s")
    return figure


def delivery_levels(table: tables.Table, factor: str) -> Figure:
    """Delivery-time p50, p90 and p99 against the levels of one factor, with CI bands."""
    rows = [row for row in table.where(factor=factor) if row["n"]]
    labels = [row["level"] for row in rows]
    figure = Figure(figsize=(8, 4), layout="constrained")
    ax = figure.subplots()
    for name in ("p50", "p90", "p99"):
        values = [row[name] for row in rows]
        ax.plot(labels, values, marker="o", label=name)
        ax.fill_between(
            labels, [row[f"{name}_low"] for row in rows], [row[f"{name}_high"] for row in rows],
            alpha=0.2,
        )  # fmt: skip
    ax.set_yscale("log")
    _plain_log_labels(ax.yaxis)
    ax.set_xlabel(factor)
    ax.set_ylabel("delivery time (ms, log scale)")
    ax.legend(loc="upper left")
    ax.set_title(f"Delivery time against {factor} (95% intervals shaded)")
    return figure
