"""The supply-chain benchmark's verdict per run, with its evidence.

A run is valid when both hold:

1. **Delivery time**, per interaction: of the messages of the interaction's kinds
   sent in the measured interval, at least 90% were delivered within 5 s — the
   90th percentile of delivery time is at most 5 s. Messages still waiting at the
   run's end after 5 s or more count as late; those waiting less are left out.
2. **Stable backlogs**: no queue or subscription of the benchmark has a growing
   backlog over the measured interval (``courier.analysis.stability``).

Delivery times are the pipeline's (``courier.analysis.delivery``: each send paired
with the read that first took the message), grouped by the interaction of the
message's queue from the run's ``destinations.json``. A run where an interaction
had no message, or a queue has too few depth samples, gets no verdict (None).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from courier.analysis import delivery, histograms, inputs, io, stability, stats, tables, transforms
from courier.measurements import destinations, record_schema
from courier.measurements import manifest as manifest_

SHARE = 0.9
UNDECIDED = "undecided: an interaction without messages or a queue without depth samples"
INTERACTION_COLUMNS = (
    "run_id", "base", "interaction", "name", "delivered", "late_backlog", "p90_ms",
    "p90_low", "p90_high", "on_time_share", "ok",
)  # fmt: skip
QUEUE_COLUMNS = (
    "run_id", "base", "queue", "kind", "interaction", "samples", "mean_depth",
    "slope_per_s", "slope_low", "slope_high", "p_growing", "growth", "material", "stable",
)  # fmt: skip
KIND_COLUMNS = ("kind", "interaction", "persistent", "ran_persistent")
QUEUES_SCHEMA = tables.arrow_schema(run_id=pa.string(), queue_id=pa.int64())
QueueMap = dict[int, dict[str, Any]]
TABLES = (  # name, title, columns of the evidence tables
    ("interactions", "Delivery time per interaction (ms)", INTERACTION_COLUMNS),
    ("queues", "Backlog trend per queue", QUEUE_COLUMNS),
    ("kinds", "Delivery mode per kind", KIND_COLUMNS),
)


@dataclass(frozen=True)
class Verdict:
    """One run: valid (None: undecided) and what failed, in words."""

    run_id: str
    base: Any
    valid: bool | None
    failing: list[str]


@dataclass(frozen=True)
class Judgement:
    verdicts: dict[str, Verdict]
    interactions: tables.Table
    queues: tables.Table
    kinds: tables.Table

    def all(self) -> list[tables.Table]:
        return [self.interactions, self.queues, self.kinds]


def judge(
    spark: SparkSession, experiment_dir: Path, run_ids: Iterable[str] | None = None
) -> Judgement:
    """Judge the benchmark runs of an experiment (all, or ``run_ids``)."""
    experiment = manifest_.load(Path(experiment_dir))
    if run_ids is not None:
        wanted = set(run_ids)
        experiment = dataclasses.replace(
            experiment, runs=tuple(run for run in experiment.runs if run.run_id in wanted)
        )
    maps = {
        run.run_id: destinations.read(experiment.directory / run.run_id) for run in experiment.runs
    }
    prepared = inputs.load(spark, experiment, io.discover(experiment), None)
    bases = {run.run_id: run.levels.get("base") for run in experiment.runs}
    rows = tables.collect(
        _timed(prepared).transform(delivery.aggregate, {"queues": ["run_id", "queue_id"]})
    )
    arrivals = _arrivals(delivery.fate_rows(rows, "queues"), prepared)
    interactions = _interaction_rows(rows, maps, bases)
    queues = _queue_rows(_depth_regressions(prepared, maps), maps, bases, arrivals, prepared)
    verdicts = {run_id: verdict_of(run_id, bases[run_id], interactions, queues) for run_id in maps}
    return Judgement(
        verdicts,
        *(
            tables.from_records(name, title, rows, columns)
            for (name, title, columns), rows in zip(
                TABLES, (interactions, queues, _kind_rows(maps)), strict=True
            )
        ),
    )


def write(judgement: Judgement, directory: Path) -> None:
    """Every evidence table as Parquet and CSV."""
    directory.mkdir(parents=True, exist_ok=True)
    for table in judgement.all():
        io.write_table(table, directory)


def _timed(prepared: inputs.Inputs) -> DataFrame:
    run_ids = list(prepared.bounds)
    return (
        prepared.requests.transform(delivery.events, run_ids)
        .transform(delivery.messages, run_ids)
        .transform(delivery.timed, list(prepared.bounds.values()))
    )


def _arrivals(fates: list[dict[str, Any]], prepared: inputs.Inputs) -> dict[tuple[str, int], float]:
    """Messages per second sent to each queue in the measured interval."""
    sent: dict[tuple[str, int], float] = defaultdict(float)
    for row in fates:
        if row["fate"] in (delivery.DELIVERED, delivery.BACKLOG):
            measured_s = prepared.bounds[row["run_id"]].measured_s
            sent[(row["run_id"], row["queue_id"])] += row["messages"] / measured_s
    return sent


def _interaction_rows(
    rows: list[dict[str, Any]], maps: Mapping[str, QueueMap], bases: Mapping[str, Any]
) -> list[dict[str, Any]]:
    cells: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    late: dict[tuple[str, int], int] = defaultdict(int)
    for row in rows:
        found = maps.get(row["run_id"], {}).get(row["queue_id"])
        if found is None:
            continue
        key = (row["run_id"], found["interaction"])
        if row["fate"] == delivery.DELIVERED:
            cells[key].append(row)
        elif row["fate"] == delivery.BACKLOG:
            late[key] += int(row["late"])
    names = {
        (run_id, q["interaction"]): q["interaction_name"]
        for run_id, m in maps.items()
        for q in m.values()
    }
    return [
        _interaction(key, names[key], cells[key], late[key], bases[key[0]]) for key in sorted(names)
    ]


def _interaction(
    key: tuple[str, int], name: str, cells: list[dict[str, Any]], late: int, base: Any
) -> dict[str, Any]:
    histogram = histograms.Histogram.of(cells)
    known = histogram.n + late
    share = histogram.on_time / known if known else None
    p90 = histogram.quantile(0.9) if histogram.n else (None, None, None)
    return {
        "run_id": key[0], "base": base, "interaction": key[1], "name": name,
        "delivered": histogram.n, "late_backlog": late, "p90_ms": p90[0], "p90_low": p90[1],
        "p90_high": p90[2], "on_time_share": share, "ok": None if share is None else share >= SHARE,
    }  # fmt: skip


def _depth_regressions(
    prepared: inputs.Inputs, maps: Mapping[str, QueueMap]
) -> list[dict[str, Any]]:
    """Regression aggregates of each benchmark queue's depth on time, per run; a queue
    missing from a sample held no message then."""
    bounds = list(prepared.bounds.values())
    depths = prepared.frames[record_schema.QUEUE_DEPTHS].transform(transforms.trim, bounds, "ts_ns")
    queues = tables.local_frame(
        prepared.spark,
        [(run_id, queue) for run_id, found in maps.items() for queue in found],
        QUEUES_SCHEMA,
    )
    instants = depths.select("run_id", "ts_ns").distinct()
    filled = (
        instants.join(queues, "run_id")
        .join(
            depths.select("run_id", "ts_ns", "queue_id", "messages"),
            ["run_id", "ts_ns", "queue_id"],
            "left",
        )
        .fillna(0, ["messages"])
        .transform(transforms.with_run_time, bounds, "ts_ns")
    )
    grouped = filled.groupBy("run_id", "queue_id").agg(*stats.regression_exprs("t_s", "messages"))
    return tables.collect(grouped)


def _queue_rows(
    regressions: list[dict[str, Any]],
    maps: Mapping[str, QueueMap],
    bases: Mapping[str, Any],
    arrivals: Mapping[tuple[str, int], float],
    prepared: inputs.Inputs,
) -> list[dict[str, Any]]:
    found = []
    for row in sorted(regressions, key=lambda r: (r["run_id"], r["queue_id"])):
        queue = maps[row["run_id"]][row["queue_id"]]
        measured_s = prepared.bounds[row["run_id"]].measured_s
        trend = stability.trend(
            row, measured_s, arrivals.get((row["run_id"], row["queue_id"]), 0.0)
        )
        found.append({
            "run_id": row["run_id"], "base": bases[row["run_id"]], "queue": queue["name"],
            "kind": queue["kind"], "interaction": queue["interaction"], "samples": int(row["n"]),
            "mean_depth": row["mean_y"],
            "slope_per_s": trend.slope if trend else None,
            "slope_low": trend.ci_low if trend else None,
            "slope_high": trend.ci_high if trend else None,
            "p_growing": trend.p_growing if trend else None,
            "growth": trend.growth if trend else None,
            "material": trend.material if trend else None,
            "stable": trend.stable if trend else None,
        })  # fmt: skip
    return found


def verdict_of(
    run_id: str, base: Any, interactions: list[dict[str, Any]], queues: list[dict[str, Any]]
) -> Verdict:
    """The run's verdict from its evidence rows: invalid (saying what failed),
    undecided, or valid."""
    mine = [row for row in interactions if row["run_id"] == run_id]
    held = [row for row in queues if row["run_id"] == run_id]
    failing = [_late_words(row) for row in mine if row["ok"] is False]
    failing += [_growing_words(row) for row in held if row["stable"] is False]
    if failing:
        return Verdict(run_id, base, False, failing)
    cells = [row["ok"] for row in mine] + [row["stable"] for row in held]
    if not mine or not held or None in cells:
        return Verdict(run_id, base, None, [UNDECIDED])
    return Verdict(run_id, base, True, [])


def _late_words(row: Mapping[str, Any]) -> str:
    p90 = "no delivery" if row["p90_ms"] is None else f"p90 of delivered {row['p90_ms']:,.0f} ms"
    return (
        f"interaction {row['interaction']} ({row['name']}): {row['on_time_share']:.1%} within 5 s"
        f" ({p90}, {row['late_backlog']} late in the backlog)"
    )


def _growing_words(row: Mapping[str, Any]) -> str:
    return (
        f"queue {row['queue']}: backlog grows {row['slope_per_s']:.2f} msg/s (95% CI"
        f" {row['slope_low']:.2f} to {row['slope_high']:.2f}, p = {row['p_growing']:.2g}),"
        f" +{row['growth']:.0f} over the measured interval"
    )


def _kind_rows(maps: Mapping[str, QueueMap]) -> list[dict[str, Any]]:
    kinds: dict[str, dict[str, Any]] = {}
    for found in maps.values():
        for queue in found.values():
            kinds.setdefault(
                queue["kind"],
                {
                    key: queue[key]
                    for key in ("kind", "interaction", "persistent", "ran_persistent")
                },
            )
    return sorted(kinds.values(), key=lambda row: (row["interaction"], row["kind"]))


def merge(judgements: list[Judgement]) -> Judgement:
    """One judgement of the runs of several (e.g. judged one at a time); none: empty."""
    if not judgements:
        empty = [tables.Table(name, title, columns) for name, title, columns in TABLES]
        return Judgement({}, *empty)
    verdicts = {key: v for judged in judgements for key, v in judged.verdicts.items()}
    merged = [
        dataclasses.replace(
            first, rows=[row for judged in judgements for row in judged.all()[index].rows]
        )
        for index, first in enumerate(judgements[0].all())
    ]
    kinds = dataclasses.replace(merged[2], rows=list(dict.fromkeys(merged[2].rows)))
    return Judgement(verdicts, merged[0], merged[1], kinds)
