"""Delivery-time tables: per run, queue and operation pair, per factor level, backlog.

One aggregation over the per-message rows (``delivery.timed``), regrouped by
each grouping set, gives the histograms of every grouping and the messages by
fate. Factor levels merge the histograms of their runs on the driver.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from courier.analysis import delivery, histograms, tables
from courier.analysis.inputs import Inputs

KEY_SETS = {
    "runs": ["run_id"],
    "queues": ["run_id", "queue_id"],
    "pairs": ["run_id", "send_op", "receive_op"],
}
TITLES = {
    "runs": "Delivery time of each run (ms)",
    "queues": "Delivery time per queue (ms)",
    "pairs": "Delivery time per operation pair: send, then the read that took it (ms)",
}
COUNT_COLUMNS = ("sent", "delivered", "backlog", "late_backlog", "unsent")
NOTE = (
    "Delivery time: from the start of the send to the reply of the read that first took "
    "the message. Messages sent in the measured interval only; percentiles from "
    f"{100 * histograms.RELATIVE_ERROR:g}%-wide logarithmic buckets with 95% order-statistic "
    "intervals; within_5s is the share of delivered messages taken within 5 s."
)


@dataclass(frozen=True)
class Delivery:
    """Delivery-time results; ``runs`` is keyed by run id for the validity verdict."""

    groups: dict[str, tables.Table]
    backlog: tables.Table
    levels: tables.Table | None
    runs: dict[str, dict[str, Any]]
    histograms: dict[str, list[dict[str, Any]]]  # each run's bucket rows, for merging

    def all(self) -> list[tables.Table]:
        found = [*self.groups.values(), self.backlog]
        return found if self.levels is None else [*found, self.levels]


def compute(inputs: Inputs) -> Delivery:
    """Pairs every message with its send and summarises the delivery times."""
    run_ids = list(inputs.bounds)
    timed = (
        inputs.requests.transform(delivery.events, run_ids)
        .transform(delivery.messages, run_ids)
        .transform(delivery.timed, list(inputs.bounds.values()))
    )
    rows = tables.collect(timed.transform(delivery.aggregate, KEY_SETS))
    fate_rows = delivery.fate_rows(rows, "queues")
    grouped = _by_group(delivery.histogram_cells(rows))
    counts = _run_counts(fate_rows)
    configs = inputs.configs
    made = {
        name: _summary_table(name, grouped[name], keys, configs, counts)
        for name, keys in KEY_SETS.items()
    }
    runs = {row["run_id"]: row for row in made["runs"].records()}
    histograms = {key[0]: cells for key, cells in grouped["runs"].items()}
    backlog = _backlog_table(fate_rows, configs)
    return Delivery(made, backlog, _levels(inputs, grouped), runs, histograms)


Group = tuple[Any, ...]


def _by_group(rows: list[dict[str, Any]]) -> dict[str, dict[Group, list[dict[str, Any]]]]:
    grouped: dict[str, dict[Group, list[dict[str, Any]]]] = {name: {} for name in KEY_SETS}
    for row in rows:
        name = row["grouping_set"]
        for side in ("send_op", "receive_op"):  # codes in Spark, names from here on
            row[side] = delivery.operation_name(row[side])
        key = tuple(row[k] for k in KEY_SETS[name])
        grouped[name].setdefault(key, []).append(row)
    return grouped


def _run_counts(fate_rows: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(COUNT_COLUMNS, 0))
    for row in fate_rows:
        cell = counts[row["run_id"]]
        fate = row["fate"]
        if fate in (delivery.DELIVERED, delivery.BACKLOG):
            cell["sent"] += row["messages"]
        if fate == delivery.BACKLOG:
            cell["late_backlog"] += row["late"]
        if fate != delivery.OUTSIDE:
            cell[fate] += row["messages"]
    return counts


def _summary_table(
    name: str,
    groups: dict[Group, list[dict[str, Any]]],
    keys: list[str],
    configs: dict[str, str],
    counts: dict[str, dict[str, int]],
) -> tables.Table:
    rows = []
    for key, cells in sorted(groups.items(), key=lambda item: tuple(map(str, item[0]))):
        row = dict(zip(keys, key, strict=True))
        row["config"] = configs.get(row["run_id"], "")
        if name == "runs":
            row |= counts.get(row["run_id"], {})
        rows.append(row | delivery.summary(histograms.Histogram.of(cells)))
    if name == "runs":  # runs whose messages were all still waiting have no histogram
        rows += [
            {"run_id": run_id, "config": configs.get(run_id, ""), **count}
            for run_id, count in sorted(counts.items())
            if (run_id,) not in groups
        ]
    extra = COUNT_COLUMNS if name == "runs" else ()
    columns = (*keys, "config", *extra, *delivery.SUMMARY_COLUMNS)
    return tables.from_records(f"delivery_{name}", TITLES[name], rows, columns, note=NOTE)


def _backlog_table(fate_rows: list[dict[str, Any]], configs: dict[str, str]) -> tables.Table:
    rows = [
        {
            "run_id": row["run_id"],
            "config": configs.get(row["run_id"], ""),
            "queue_id": row["queue_id"],
            "messages": row["messages"],
            "waiting_over_5s": row["late"],
            "min_waited_ms": row["min_waited_ms"],
            "max_waited_ms": row["max_waited_ms"],
        }
        for row in sorted(fate_rows, key=lambda r: (r["run_id"], r["queue_id"] or 0))
        if row["fate"] == delivery.BACKLOG
    ]
    columns = ("run_id", "config", "queue_id", "messages", "waiting_over_5s")
    return tables.from_records(
        "backlog",
        "Backlog: messages sent in the measured interval and never taken within the run",
        rows,
        (*columns, "min_waited_ms", "max_waited_ms"),
        note="Waited: from the send to the end of the run. These messages are not in the "
        "delivery-time figures, whose percentiles are therefore those of delivered messages.",
    )


def _levels(inputs: Inputs, grouped: dict[str, dict[Group, list[Any]]]) -> tables.Table | None:
    experiment = inputs.experiment
    if not experiment.factors:
        return None
    rows = []
    for factor, levels in experiment.factors.items():
        for level in levels:
            run_ids = [r.run_id for r in experiment.runs if r.levels.get(factor) == level]
            cells = [c for run_id in run_ids for c in grouped["runs"].get((run_id,), [])]
            row = {"factor": factor, "level": str(level), "runs": len(run_ids)}
            rows.append(row | delivery.summary(histograms.Histogram.of(cells)))
    columns = ("factor", "level", "runs", *delivery.SUMMARY_COLUMNS)
    return tables.from_records(
        "delivery_levels", "Delivery time against factor levels (ms)", rows, columns, note=NOTE
    )
