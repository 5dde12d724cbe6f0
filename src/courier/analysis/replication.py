"""The report of a cluster experiment (`courier lab cluster`): rates and stability of
the members of a replicated queue, and the controller's decisions.

From each run's records: the messages stored and taken per second and member
(the clients' sends and receives that succeeded, counted by Spark from
client_requests and placed in the member whose queue they named), the members'
lengths and client counts (replica_samples) and the decisions (cluster_decisions).
A member is stable when its length does not grow: its length's trend (least
squares, messages per second) is the measure. Rates are in messages per
millisecond, as in the study the experiments come from.

    report_dir = write_report(Path("experiments/cluster-balancing"))
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
from matplotlib.figure import Figure

from courier.analysis import io, plots, session, tables
from courier.measurements import manifest, record_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

NS_PER_S = 1_000_000_000
TAKES = ("receive", "pop", "receive_many", "pop_many")
DECISION_COLOURS = {"add": "#2ca02c", "remove": "#d62728", "move": "0.6"}


@dataclass(frozen=True)
class RunResult:
    run_id: str
    levels: dict[str, Any]
    origin_ns: int  # the wall-clock second of the first send: second 0
    seconds: np.ndarray  # per second since the first send
    produced: dict[int, np.ndarray]  # member -> messages stored per second
    consumed: dict[int, np.ndarray]
    samples: list[dict[str, Any]]
    decisions: list[dict[str, Any]]
    clients: dict[int, tuple[int, int]]  # member -> (producers, consumers) that used it

    @property
    def duration_s(self) -> float:
        return float(len(self.seconds))

    def total(self, per_member: dict[int, np.ndarray]) -> np.ndarray:
        return np.sum(list(per_member.values()), axis=0) if per_member else np.zeros(0)

    def rate_per_ms(self, per_member: dict[int, np.ndarray]) -> float:
        """Mean messages per millisecond over the seconds with traffic."""
        total = self.total(per_member)
        busy = np.flatnonzero(total)
        if not busy.size:
            return 0.0
        span_s = int(busy[-1] - busy[0]) + 1
        return float(total.sum()) / span_s / 1000

    def trends(self) -> dict[int, float]:
        """Each member's length trend in messages per second (least squares)."""
        found = {}
        for member in sorted({s["member"] for s in self.samples}):
            rows = [s for s in self.samples if s["member"] == member]
            if len(rows) >= 2:
                xs = np.array([r["ts_ns"] for r in rows], dtype=float) / NS_PER_S
                ys = np.array([r["length"] for r in rows], dtype=float)
                found[member] = float(np.polyfit(xs - xs[0], ys, 1)[0])
        return found


def write_report(experiment: Path, spark: SparkSession | None = None) -> Path:
    """Analyse every run; returns the report directory (index.html, tables, figures)."""
    found = manifest.load(experiment)
    report_dir = experiment / "report"
    if spark is None:
        with session.opened() as opened:
            results = [analyse_run(opened, experiment / run.run_id, run) for run in found.runs]
    else:
        results = [analyse_run(spark, experiment / run.run_id, run) for run in found.runs]
    figures = [_save(run_figure(result), report_dir, f"run-{result.run_id}") for result in results]
    figures.insert(0, _save(comparison_figure(results), report_dir, "comparison"))
    rows = summary_rows(results)
    columns = list(rows[0]) if rows else ["run"]
    io.write_table(tables.from_records("summary", "Runs", rows, columns), report_dir)
    (report_dir / "index.html").write_text(_html(found.name, rows, figures))
    return report_dir


def analyse_run(spark: SparkSession, run_dir: Path, run: manifest.Run) -> RunResult:
    samples = _rows(run_dir / record_schema.REPLICA_SAMPLES)
    members = {s["queue_id"]: s["member"] for s in samples}
    requests = _moving_requests(spark, run_dir)
    origin_s, counts = _per_second(requests)
    clients: dict[int, list[int]] = {}
    for queue, behaviour, count in _clients_per_queue(requests):
        if queue in members:
            clients.setdefault(members[queue], [0, 0])[behaviour == "consumer"] += count
    last = max((second for second, *_ in counts), default=-1)
    seconds = np.arange(last + 1)
    produced: dict[int, np.ndarray] = {m: np.zeros(last + 1) for m in set(members.values())}
    consumed: dict[int, np.ndarray] = {m: np.zeros(last + 1) for m in set(members.values())}
    for second, queue, stored, taken in counts:
        member = members.get(queue)
        if member is not None:
            produced[member][second] += stored
            consumed[member][second] += taken
    decisions = _rows(run_dir / record_schema.CLUSTER_DECISIONS)
    return RunResult(
        run.run_id, dict(run.levels), origin_s * NS_PER_S, seconds, produced, consumed,
        samples, decisions, {m: (p, c) for m, (p, c) in clients.items()},
    )  # fmt: skip


def _moving_requests(spark: SparkSession, run_dir: Path) -> DataFrame:
    """The clients' requests that stored or took messages, with the second they ended."""
    from pyspark.sql import functions as f

    paths = sorted((run_dir / record_schema.CLIENT_REQUESTS).glob("*.parquet"))
    requests = io.read(spark, record_schema.CLIENT_REQUESTS, paths)
    return requests.where((f.col("status") == "OK") & (f.size("message_ids") > 0)).select(
        ((f.col("start_ns") + f.col("response_ns")) / NS_PER_S).cast("long").alias("at_s"),
        f.element_at("queue_ids", 1).alias("queue"),
        "behaviour",
        "client_id",
        f.when(f.col("operation") == "send", f.size("message_ids")).otherwise(0).alias("stored"),
        f.when(f.col("operation").isin(*TAKES), f.size("message_ids")).otherwise(0).alias("taken"),
    )


def _per_second(moved: DataFrame) -> tuple[int, list[tuple[int, int, int, int]]]:
    """The wall-clock second of the first send, and per (second since it, queue) the
    messages stored and taken."""
    from pyspark.sql import functions as f

    first = moved.agg(f.min("at_s")).first()
    if first is None or first[0] is None:
        return 0, []
    grouped = (
        moved.withColumn("second", f.col("at_s") - f.lit(first[0]))
        .groupBy("second", "queue")
        .agg(f.sum("stored").alias("stored"), f.sum("taken").alias("taken"))
    )
    return first[0], [(r["second"], r["queue"], r["stored"], r["taken"]) for r in grouped.collect()]


def _clients_per_queue(moved: DataFrame) -> list[tuple[int, str, int]]:
    """(queue, behaviour, clients that stored in it or took from it)."""
    from pyspark.sql import functions as f

    grouped = moved.groupBy("queue", "behaviour").agg(f.countDistinct("client_id").alias("n"))
    return [(r["queue"], r["behaviour"], r["n"]) for r in grouped.collect()]


def _rows(directory: Path) -> list[dict[str, Any]]:
    files = sorted(directory.glob("*.parquet"))
    if not files:
        return []
    table: pa.Table = pads.dataset([str(p) for p in files]).to_table()
    return sorted(table.to_pylist(), key=lambda row: (row["ts_ns"], row.get("member", 0)))


# -- figures --------------------------------------------------------------------------


def run_figure(result: RunResult) -> Figure:
    """Per second: production and consumption per member and in all; member lengths;
    the controller's decisions as vertical lines."""
    figure = Figure(figsize=(10, 7.5), layout="constrained")
    rates, lengths = figure.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    for member, values in sorted(result.produced.items()):
        rates.plot(result.seconds, values / 1000, label=f"member {member}: produced", linewidth=1)
    for member, values in sorted(result.consumed.items()):
        rates.plot(result.seconds, values / 1000, linestyle="--", linewidth=1,
                   label=f"member {member}: consumed")  # fmt: skip
    rates.plot(result.seconds, result.total(result.consumed) / 1000, color="black",
               linewidth=2, label="consumed, all members")  # fmt: skip
    rates.set_ylabel("messages / ms")
    for member in sorted({s["member"] for s in result.samples}):
        rows = [s for s in result.samples if s["member"] == member]
        xs = [(r["ts_ns"] - result.origin_ns) / NS_PER_S for r in rows]
        lengths.plot(xs, [r["length"] for r in rows], label=f"member {member}")
    lengths.set_ylabel("messages waiting")
    lengths.set_xlabel("seconds since the first send")
    for decision in result.decisions:
        if decision["decision"] in ("add", "remove"):
            at = (decision["ts_ns"] - result.origin_ns) / NS_PER_S
            for ax in (rates, lengths):
                ax.axvline(at, color=DECISION_COLOURS[decision["decision"]], alpha=0.7)
    levels = ", ".join(f"{k} = {v}" for k, v in result.levels.items())
    rates.set_title(f"{result.run_id} {levels}".strip() + " (green: member added, red: removed)")
    rates.legend(fontsize="small", ncols=2)
    lengths.legend(fontsize="small")
    return figure


def comparison_figure(results: Iterable[RunResult]) -> Figure:
    figure = Figure(figsize=(10, 4.5), layout="constrained")
    ax = figure.subplots()
    for result in results:
        levels = ", ".join(f"{k} = {v}" for k, v in result.levels.items()) or result.run_id
        ax.plot(result.seconds, result.total(result.consumed) / 1000, label=levels)
    ax.set_xlabel("seconds since the first send")
    ax.set_ylabel("messages consumed / ms")
    ax.set_title("Consumption rate of the replicated queue, each run")
    ax.legend()
    return figure


def _save(figure: Figure, directory: Path, stem: str) -> Path:
    return plots.save(figure, directory / "figures", stem)[0]


# -- tables ---------------------------------------------------------------------------


def summary_rows(results: Iterable[RunResult]) -> list[dict[str, Any]]:
    rows = []
    for result in results:
        trends = result.trends()
        members = sorted({s["member"] for s in result.samples})
        rows.append({
            "run": result.run_id,
            **{str(k): v for k, v in result.levels.items()},
            "produced": int(result.total(result.produced).sum()),
            "consumed": int(result.total(result.consumed).sum()),
            "seconds": result.duration_s,
            "production_per_ms": round(result.rate_per_ms(result.produced), 3),
            "consumption_per_ms": round(result.rate_per_ms(result.consumed), 3),
            "members_at_end": len({s["member"] for s in result.samples
                                   if s["ts_ns"] == result.samples[-1]["ts_ns"]}),
            "clients_per_member": " ".join(
                f"{m}:{result.clients.get(m, (0, 0))[0]}P/{result.clients.get(m, (0, 0))[1]}C"
                for m in members
            ),
            "length_trend_per_s": " ".join(f"{m}:{trends[m]:+.1f}" for m in sorted(trends)),
            "added": sum(d["decision"] == "add" for d in result.decisions),
            "removed": sum(d["decision"] == "remove" for d in result.decisions),
            "moved": sum(d["moved"] for d in result.decisions),
        })  # fmt: skip
    return rows


def _html(name: str, rows: list[dict[str, Any]], figures: list[Path]) -> str:
    columns = list(rows[0]) if rows else []
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(row.get(c, '')))}</td>" for c in columns) + "</tr>"
        for row in rows
    )
    images = "".join(
        f'<figure><img src="figures/{p.name}" alt="{html.escape(p.stem)}"></figure>'
        for p in figures
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(name)}</title>"
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}"
        "img{max-width:100%}</style></head><body>"
        f"<h1>{html.escape(name)}</h1><p>Rates in messages per millisecond; a length trend"
        " above zero means the member does not keep up (unstable).</p>"
        f"<table><tr>{head}</tr>{body}</table>{images}</body></html>"
    )
