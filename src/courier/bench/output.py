"""What a person sees: progress while a benchmark runs, tables and a plot afterwards."""

from __future__ import annotations

import math
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from courier.bench import (
    chaos,
    chaos_ledger,
    churn,
    database,
    flat,
    fuzz,
    fuzzclients,
    fuzzgood,
    pops,
    results,
    standard,
)

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
    """A bar over the phase that is running, e.g. the seconds of a level (on stderr)."""

    def __init__(self, console: Console) -> None:
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[amount]}"),
            TimeRemainingColumn(),
            console=console,
        )
        self._task = self.progress.add_task("", total=1, visible=False, amount="")
        self._total: float | None = None
        self._unit = ""

    def __enter__(self) -> ProgressReporter:
        self.progress.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.progress.stop()

    def phase(self, description: str, total: float | None, unit: str) -> None:
        # A new task: a task's total cannot be set back to None (no known end).
        self.progress.remove_task(self._task)
        self._task = self.progress.add_task(description, total=total, amount="")
        self._total, self._unit = total, unit
        self.advance(0)

    def advance(self, completed: float) -> None:
        total = self._total
        done = f"{completed:,.0f}" + ("" if total is None else f"/{total:,.0f}")
        amount = f"{done} {self._unit}" if completed or total is not None else ""
        self.progress.update(self._task, completed=completed, amount=amount)

    def level_started(self, system: str, clients: int, seconds: float) -> None:
        self.phase(f"{system:<10} {clients:>5} clients", seconds, "s")

    def level_progress(self, elapsed_s: float) -> None:
        self.advance(elapsed_s)

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
BATCH_COLUMNS = ("system", "clients", "requests/s", "msgs/s", "delivered/s", "p50 ms", "p90 ms",
                 "p99 ms")  # fmt: skip


def level_tables(found: Sequence[results.LevelResult]) -> list[Table]:
    """One table per number of clients, Courier against each peer (with rounds, a row
    per system and round, each compared with Courier's run of the same round)."""
    by_peer = {(r.clients, r.peer, r.round): r for r in results.ratios(found)}
    rounds = _in_rounds(found)
    tables = []
    for clients in sorted({result.clients for result in found}):
        level = [r for r in found if r.clients == clients]
        batch = max(result.batch for result in level)
        title = f"{clients} clients" + (f", batches of {batch}" if batch > 1 else "")
        table = Table(title=title, title_justify="left")
        columns = (*(BATCH_COLUMNS if batch > 1 else COLUMNS), *(("round",) if rounds else ()))
        for column in (*columns, "msgs ratio" if batch > 1 else "ops ratio", "p99 ratio"):
            table.add_column(column, justify="left" if column == "system" else "right")
        for result in sorted(level, key=lambda r: r.round):
            compared = by_peer.get((clients, result.system, result.round))
            table.add_row(
                result.system, str(clients), *_rates(result), *_percentiles(result.latency),
                *((str(result.round),) if rounds else ()),
                _times(compared.ops if compared else None),
                _times(compared.p99 if compared else None),
            )  # fmt: skip
        tables.append(table)
    return tables


def _in_rounds(found: Sequence[results.LevelResult]) -> bool:
    """Whether the run had several rounds (``--rounds``)."""
    return max((result.round for result in found), default=1) > 1


SPREAD_COLUMNS = ("clients", "peer", "rounds", "ops ratio median", "smallest", "largest",
                  "p99 ratio median", "smallest", "largest")  # fmt: skip


def spread_table(found: Sequence[results.LevelResult]) -> Table | None:
    """The ratios over the rounds, per level and peer; None for a run of one round."""
    if not _in_rounds(found):
        return None
    table = Table(title="ratios over the rounds (courier ÷ peer)", title_justify="left")
    for column in SPREAD_COLUMNS:
        table.add_column(column, justify="left" if column == "peer" else "right")
    for spread in results.spreads(results.ratios(found)):
        table.add_row(
            str(spread.clients), spread.peer, str(spread.rounds),
            _times(spread.ops_median), _times(spread.ops_min), _times(spread.ops_max),
            _times(spread.p99_median), _times(spread.p99_min), _times(spread.p99_max),
        )  # fmt: skip
    return table


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


def _rates(result: results.LevelResult) -> list[str]:
    rates: tuple[float, ...] = (result.ops_per_s, result.cycles_per_s)
    if result.batch > 1:
        rates = (result.ops_per_s, result.messages_per_s, result.delivered_per_s)
    return [f"{rate:,.0f}" for rate in rates]


def _percentiles(latency: results.Latency | None) -> list[str]:
    if latency is None:
        return ["-", "-", "-"]
    return [f"{latency.p50_ms:.2f}", f"{latency.p90_ms:.2f}", f"{latency.p99_ms:.2f}"]


def _times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _pyplot() -> Any:
    import matplotlib  # only when a plot is asked for: it is slow to import

    matplotlib.use("Agg")
    from matplotlib import pyplot

    return pyplot


def _save(figure: Any, path: Path) -> None:
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    _pyplot().close(figure)


def plot(found: Sequence[results.LevelResult], path: Path) -> None:
    """Throughput and p99 against clients, one line per system (PNG or SVG by suffix);
    with rounds, each point is the median of the rounds."""
    from matplotlib import ticker

    figure, (throughput, tail) = _pyplot().subplots(1, 2, figsize=(11, 4.2))
    for system in dict.fromkeys(result.system for result in found):
        medians = _medians_by_level([r for r in found if r.system == system])
        clients = sorted(medians)
        throughput.plot(clients, [medians[c][0] for c in clients], marker="o", label=system)
        tail.plot(clients, [medians[c][1] for c in clients], marker="o", label=system)
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
    _save(figure, path)


def _medians_by_level(mine: Sequence[results.LevelResult]) -> dict[int, tuple[float, float]]:
    """Per number of clients, the median ops/s and p99 (ms; nan: none) of the rounds."""
    grouped: dict[int, list[results.LevelResult]] = {}
    for result in mine:
        grouped.setdefault(result.clients, []).append(result)
    medians = {}
    for clients, level in grouped.items():
        p99 = [r.latency.p99_ms for r in level if r.latency is not None]
        medians[clients] = (
            statistics.median(r.ops_per_s for r in level),
            statistics.median(p99) if p99 else math.nan,
        )
    return medians


# -- churn, flat, pops --------------------------------------------------------------------


def churn_table(settings: churn.Settings, found: churn.ChurnResult) -> Table:
    """One row per interval: the clients' figures, then courier_messages at its end."""
    table = Table(
        title=f"churn: {settings.clients} clients, {settings.middlewares} middleware,"
        f" {settings.interval_s:g} s intervals",
        title_justify="left",
    )
    for column in ("interval s", "ops/s", "cycles/s", "p50 ms", "p99 ms", "live rows",
                   "dead rows", "autovacuums", "size MiB"):  # fmt: skip
        table.add_column(column, justify="right")
    for interval in found.intervals:
        sample = found.sample_after(interval)
        latency = _percentiles(interval.latency)
        table.add_row(
            f"{interval.start_s:g}-{interval.end_s:g}", f"{interval.ops_per_s:,.0f}",
            f"{interval.cycles_per_s:,.0f}", latency[0], latency[2],
            *(_table_sample(sample) if sample else ["-"] * 4),
        )  # fmt: skip
    return table


def _table_sample(sample: database.TableSample) -> list[str]:
    return [f"{sample.live_rows:,}", f"{sample.dead_rows:,}", str(sample.autovacuums),
            f"{sample.total_bytes / 2**20:,.1f}"]  # fmt: skip


def churn_plot(found: churn.ChurnResult, path: Path) -> None:
    """Throughput per interval, and dead rows against time."""
    figure, (throughput, dead) = _pyplot().subplots(1, 2, figsize=(11, 4.2))
    throughput.bar(
        [interval.start_s for interval in found.intervals],
        [interval.ops_per_s for interval in found.intervals],
        width=[interval.seconds * 0.9 for interval in found.intervals], align="edge",
    )  # fmt: skip
    throughput.set_ylabel("operations per second")
    dead.plot([s.at_s for s in found.samples], [s.dead_rows for s in found.samples], marker="o")
    dead.set_ylabel("dead rows in courier_messages")
    for axes in (throughput, dead):
        axes.set_xlabel("seconds into the measured window")
        axes.set_ylim(bottom=0)
        axes.grid(True, alpha=0.3)
    figure.suptitle("Courier under churn: send + pop for the whole run")
    _save(figure, path)


def flat_table(found: flat.FlatResult) -> Table:
    """One row per level of background rows: pop and send percentiles, p50 ratios."""
    table = Table(title="pop and send latency with other messages stored", title_justify="left")
    reference = f"pop p50 ms with {found.reference.background:,}, in turns"
    table.add_column("other messages", justify="right", min_width=len("10,000,000"))
    for column in ("load s", "pop p50 ms", "pop p90 ms", "pop p99 ms", reference,
                   "pop p50 ratio", "send p50 ms", "send p90 ms", "send p99 ms",
                   "send p50 ratio"):  # fmt: skip
        table.add_column(column, justify="right")
    for level in found.levels:
        alongside = None if level.alongside is None else level.alongside.pop_latency
        table.add_row(
            f"{level.background:,}", f"{level.load_s:.1f}", *_percentiles(level.pop_latency),
            "-" if alongside is None else f"{alongside.p50_ms:.2f}",
            _times(found.pop_ratio(level)), *_percentiles(level.send_latency),
            _times(found.send_ratio(level)),
        )  # fmt: skip
    return table


def flat_plot(found: flat.FlatResult, path: Path) -> None:
    """Pop and send latency percentiles against the background, one point per level."""
    figure, axes = _pyplot().subplots(figsize=(7, 4.2))
    places = range(len(found.levels))
    series = {
        "pop": [level.pop_latency for level in found.levels],
        "send": [level.send_latency for level in found.levels],
    }
    for name, latencies in series.items():
        for quantile in ("p50_ms", "p99_ms"):
            values = [getattr(each, quantile, float("nan")) for each in latencies]
            axes.plot(places, values, marker="o", label=f"{name} {quantile[:3]}")
    alongside = [found.reference_for(level).pop_latency for level in found.levels]
    axes.plot(
        places, [getattr(each, "p50_ms", float("nan")) for each in alongside], linestyle="--",
        marker="x", label=f"pop p50 with {found.reference.background:,}, in turns",
    )  # fmt: skip
    axes.set_xticks(list(places), [f"{level.background:,}" for level in found.levels])
    axes.set_xlabel("other messages stored")
    axes.set_ylabel("latency (ms)")
    axes.set_ylim(bottom=0)
    axes.grid(True, alpha=0.3)
    axes.legend()
    figure.suptitle("Courier: one pop among many messages for others")
    _save(figure, path)


def pops_table(settings: pops.Settings, found: pops.PopsResult) -> Table:
    """One row per number of poppers."""
    per_call = f"{settings.batch} pops per call" if settings.batch else "one pop per call"
    table = Table(title=f"pops: {settings.messages:,} messages, {per_call}", title_justify="left")
    for column in ("poppers", "pops", "pops/s", "p50 ms", "p90 ms", "p99 ms",
                   f"ratio to {pops.REFERENCE}", "exactly once"):  # fmt: skip
        table.add_column(column, justify="right")
    for level in found.levels:
        table.add_row(
            str(level.poppers), f"{level.pops:,}", f"{level.pops_per_s:,.0f}",
            *_percentiles(level.latency), _times(found.ratio(level)),
            "yes" if level.exactly_once else "NO",
        )  # fmt: skip
    return table


# -- fuzz ----------------------------------------------------------------------------------


def fuzz_tables(found: fuzz.FuzzResult) -> list[Table]:
    """Frames by kind, how connections ended, replies by status, the good clients, the servers."""
    tally = found.tally
    return [
        _count_table("frames sent, by kind", "kind", tally.frames),
        _count_table("fuzzing connections, by how they ended", "ending", tally.endings,
                     caption=_connections_caption(tally)),
        _count_table("replies to the fuzzers, by status", "status", tally.statuses),
        _good_table(found.goods),
        _servers_table(found.servers),
    ]  # fmt: skip


def _count_table(
    title: str, what: str, counts: dict[str, int], caption: str | None = None
) -> Table:
    table = Table(title=title, title_justify="left", caption=caption, caption_justify="left")
    total = sum(counts.values())
    for column in (what, "count", "share"):
        table.add_column(column, justify="left" if column == what else "right")
    for name, count in sorted(counts.items(), key=lambda item: -item[1]):
        table.add_row(name, f"{count:,}", f"{count / total:.1%}")
    table.add_row("all", f"{total:,}", "", end_section=True)
    return table


def _connections_caption(tally: fuzzclients.Tally) -> str:
    roles = ", ".join(f"{count:,} {role}" for role, count in tally.roles.items())
    lines = [f"opened: {sum(tally.roles.values()):,} ({roles})"]
    summary = fuzz.stall_summary(tally.stall_drops_s)
    if summary is not None:
        low, high, median = summary["min"], summary["max"], summary["median"]
        lines.append(f"stalled connections were dropped {low:.2f}-{high:.2f} s after their"
                     f" partial frame (median {median:.2f} s)")  # fmt: skip
    return "\n".join(lines)


def _good_table(goods: Sequence[fuzzgood.GoodReport]) -> Table:
    table = Table(title="well-behaved clients (send + receive)", title_justify="left")
    for column in ("server", "operations", "errors", "lost", "foreign", "late", "p50 ms",
                   "p99 ms", "max ms"):  # fmt: skip
        table.add_column(column, justify="left" if column == "server" else "right")
    for good in goods:
        latency, top = fuzz.good_latency(good)
        percentiles = _percentiles(latency)
        table.add_row(
            good.server, f"{good.operations:,}", str(good.errors), str(good.lost),
            str(good.foreign), str(good.late), percentiles[0], percentiles[2],
            "-" if top is None else f"{top:.2f}",
        )  # fmt: skip
    return table


def _servers_table(servers: Sequence[fuzz.ServerResult]) -> Table:
    table = Table(title="servers after the fuzz", title_justify="left")
    for column in ("server", "alive", "accepting", "RSS start MiB", "RSS max MiB",
                   "RSS end MiB", "memory bounded", "errors logged"):  # fmt: skip
        table.add_column(column, justify="left" if column == "server" else "right")
    for server in servers:
        table.add_row(
            server.address, _yes(server.alive), _yes(server.accepting), _mib(server.rss_start),
            _mib(server.rss_max), _mib(server.rss_end), _yes(server.bounded),
            str(len(server.logged_errors)),
        )  # fmt: skip
    return table


def _yes(value: bool | None) -> str:
    return "?" if value is None else "yes" if value else "NO"


def _mib(value: int | None) -> str:
    return "-" if value is None else f"{value / 2**20:,.1f}"


# -- chaos -------------------------------------------------------------------------------


def chaos_table(settings: chaos.Settings, found: chaos.ChaosResult) -> Table:
    """What the chaos run did and what became of every message."""
    table = Table(
        title=f"chaos: {settings.producers} producers, {settings.consumers} consumers,"
        f" {settings.middlewares} middleware, a kill every {settings.kill_interval_s:g} s",
        title_justify="left",
    )
    table.add_column("", justify="left")
    table.add_column("", justify="right")
    table.show_header = False
    for section in _chaos_sections(found):
        for index, (label, value) in enumerate(section):
            table.add_row(label, value, end_section=index == len(section) - 1)
    return table


def _chaos_sections(found: chaos.ChaosResult) -> list[list[tuple[str, str]]]:
    a = found.accounts
    messages = [
        ("messages sent / confirmed", f"{a.sends_confirmed + a.sends_unconfirmed:,}"
                                      f" / {a.sends_confirmed:,}"),
        ("sends retried (same dedup id)", f"{a.retried_sends:,}"),
        ("acked", f"{a.acked:,}"),
        ("acked, reply lost (ack's fate unknown, gone from the queue)", f"{a.acked_reply_lost:,}"),
        ("lost", f"{a.lost:,}"),
        ("duplicate acks", f"{a.duplicate_acks:,}"),
        ("left in the database (messages, held)",
         f"{found.leftovers['messages']:,}, {found.leftovers['held']:,}"),
        ("most messages waiting at once (sampled)", f"{found.most_waiting:,}"),
    ]  # fmt: skip
    deliveries = [
        ("deliveries received", f"{a.deliveries:,}"),
        ("redeliveries", f"{a.redelivered:,}"),
        *((f"  {reason}", f"{count:,}") for reason, count in sorted(a.redeliveries.items())),
        ("acks answered LeaseExpired", f"{a.lease_expired_acks:,}"),
        ("leases granted, reply never received", f"{a.unseen_deliveries:,}"),
    ]
    chaos_rows = [
        ("middleware kills", f"{len(found.kills)}"),
        ("PostgreSQL restarts", f"{len(found.restarts)}"),
        ("failovers: logged in again", _spread(found.failover)),
        ("failovers: next call answered", _spread(chaos_ledger.spread(found.outages.answered))),
        ("back after the PostgreSQL restart",
         _spread(chaos_ledger.spread(found.outages.database))),
        ("throughput: confirmed sends/s, acked/s",
         f"{_per_s(a.sends_confirmed, found.producing_s)},"
         f" {_per_s(a.acked, found.total_s)}"),
    ]  # fmt: skip
    return [messages, deliveries, chaos_rows]


def _spread(spread: dict[str, float] | None) -> str:
    if spread is None:
        return "-"
    return (f"{spread['count']:,.0f}: p50 {spread['p50_s']:.3f} s, p99 {spread['p99_s']:.3f} s,"
            f" max {spread['max_s']:.3f} s")  # fmt: skip


def _per_s(count: int, seconds: float) -> str:
    return f"{count / seconds:,.0f}" if seconds > 0 else "-"
