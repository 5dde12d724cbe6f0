"""What a person sees: progress while a benchmark runs, tables and a plot afterwards."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from courier.bench import results, standard

PLOT_SUFFIXES = (".png", ".svg")
PIPED_WIDTH = 120
RATIO_CAPTION = (
    "ratios are courier ÷ this system: ops ratio > 1, Courier did more operations per second;"
    " p99 ratio < 1, Courier's 99th percentile was shorter"
)


def stdout() -> Console:
    """Tables on stdout, wide enough for every column also when piped to a file."""
    width = None if sys.stdout.isatty() else PIPED_WIDTH
    return Console(file=sys.stdout, soft_wrap=True, width=width)


class ProgressReporter:
    """A bar over the seconds of the level that is running (on stderr)."""

    def __init__(self, console: Console) -> None:
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed:.0f}/{task.total:.0f} s"),
            TimeRemainingColumn(),
            console=console,
        )
        self._task = self.progress.add_task("", total=1, visible=False)

    def __enter__(self) -> ProgressReporter:
        self.progress.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.progress.stop()

    def level_started(self, system: str, clients: int, seconds: float) -> None:
        self.progress.reset(self._task, total=seconds, visible=True)
        self.progress.update(self._task, description=f"{system:<10} {clients:>5} clients")

    def level_progress(self, elapsed_s: float) -> None:
        self.progress.update(self._task, completed=elapsed_s)

    def level_finished(self, result: results.LevelResult) -> None:
        self.progress.update(self._task, visible=False)
        p99 = f"{result.latency.p99_ms:.2f} ms" if result.latency else "-"
        self.note(
            f"{result.system} at {result.clients} clients: {result.ops_per_s:,.0f} ops/s,"
            f" p99 {p99}" + (f", {result.errors} failed requests" if result.errors else "")
        )
        if result.last_error:
            self.note(f"  last error: {result.last_error}")

    def note(self, text: str) -> None:
        self.progress.console.print(text, markup=False, highlight=False)


COLUMNS = ("system", "clients", "ops/s", "cycles/s", "p50 ms", "p90 ms", "p99 ms")


def level_tables(found: Sequence[results.LevelResult]) -> list[Table]:
    """One table per number of clients, Courier against each peer."""
    by_peer = {(r.clients, r.peer): r for r in results.ratios(found)}
    tables = []
    for clients in sorted({result.clients for result in found}):
        table = Table(title=f"{clients} clients", title_justify="left")
        for column in (*COLUMNS, "ops ratio", "p99 ratio"):
            table.add_column(column, justify="left" if column == "system" else "right")
        for result in (r for r in found if r.clients == clients):
            compared = by_peer.get((clients, result.system))
            table.add_row(
                result.system, str(clients), f"{result.ops_per_s:,.0f}",
                f"{result.cycles_per_s:,.0f}", *_percentiles(result.latency),
                _times(compared.ops if compared else None),
                _times(compared.p99 if compared else None),
            )  # fmt: skip
        tables.append(table)
    return tables


def standard_table(settings: standard.Settings, found: standard.StandardResult) -> Table:
    """Per operation, then all requests together."""
    table = Table(
        title=f"standard cycle: {settings.clients} clients, {settings.middlewares} middleware,"
        f" {found.measured_s:.1f} s measured",
        title_justify="left",
    )
    for column in ("operation", "requests", "requests/s", "p50 ms", "p90 ms", "p99 ms"):
        table.add_column(column, justify="left" if column == "operation" else "right")
    last = len(found.operations) - 1
    for index, summary in enumerate((*found.operations, found.overall)):
        table.add_row(
            summary.operation, str(summary.requests), f"{summary.requests_per_s:,.0f}",
            *_percentiles(summary.latency), end_section=index == last,
        )  # fmt: skip
    return table


def _percentiles(latency: results.Latency | None) -> list[str]:
    if latency is None:
        return ["-", "-", "-"]
    return [f"{latency.p50_ms:.2f}", f"{latency.p90_ms:.2f}", f"{latency.p99_ms:.2f}"]


def _times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def plot(found: Sequence[results.LevelResult], path: Path) -> None:
    """Throughput and p99 against clients, one line per system (PNG or SVG by suffix)."""
    import matplotlib  # only when a plot is asked for: it is slow to import

    matplotlib.use("Agg")
    from matplotlib import pyplot, ticker

    figure, (throughput, tail) = pyplot.subplots(1, 2, figsize=(11, 4.2))
    for system in dict.fromkeys(result.system for result in found):
        mine = sorted((r for r in found if r.system == system), key=lambda r: r.clients)
        clients = [r.clients for r in mine]
        throughput.plot(clients, [r.ops_per_s for r in mine], marker="o", label=system)
        p99 = [r.latency.p99_ms if r.latency else float("nan") for r in mine]
        tail.plot(clients, p99, marker="o", label=system)
    levels = sorted({result.clients for result in found})
    for axes, label in ((throughput, "operations per second"), (tail, "p99 latency (ms)")):
        axes.set_xscale("log", base=2)
        axes.set_xticks(levels, [str(level) for level in levels])
        axes.minorticks_off()
        axes.set_xlabel("clients")
        axes.set_ylabel(label)
        axes.grid(True, which="both", alpha=0.3)
        axes.legend()
    tail.set_yscale("log")
    tail.yaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))  # 1, 2, 5, 10, ...
    tail.yaxis.set_major_formatter(ticker.StrMethodFormatter("{x:g}"))
    tail.yaxis.set_minor_formatter(ticker.NullFormatter())
    figure.suptitle("Courier and its peers: send + pop on one shared queue")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    pyplot.close(figure)
