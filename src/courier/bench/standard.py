"""`courier bench standard`: the lab's 12-step standard cycle, summed up in one table.

It is an ordinary lab experiment (``courier.lab.runner``: a fresh durable embedded
PostgreSQL, M middleware, the clients in several load-generator processes), whose
client records are then read back with pyarrow: requests per second and latency
percentiles over the measured interval, overall and per operation. The interval is
the one the analysis uses (``analysis.trimming``): warm-up and cool-down left out,
requests counted by the instant they started.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy
import pyarrow
import pyarrow.parquet

from courier.analysis import trimming
from courier.bench import defaults, results
from courier.lab import host, runner, spec
from courier.measurements import manifest as manifest_
from courier.measurements import record_schema

NAME = "bench-standard"
COOLDOWN_S = 1.0
BEHAVIOUR = "standard"


@dataclass(frozen=True, slots=True)
class Settings:
    clients: int = 64
    middlewares: int = defaults.MIDDLEWARES
    duration_s: float = defaults.DURATION_S  # measured; the run adds warm-up and cool-down
    warmup_s: float = defaults.WARMUP_S
    processes: int = defaults.PROCESSES

    def as_json(self) -> dict[str, Any]:
        return {
            "clients": self.clients,
            "middlewares": self.middlewares,
            "duration_s": self.duration_s,
            "warmup_s": self.warmup_s,
            "processes": self.processes,
            "database": "fresh embedded PostgreSQL, durable",
        }


def experiment(settings: Settings) -> spec.ExperimentSpec:
    """The lab experiment: one run of ``standard`` clients on a durable database."""
    per_middleware = math.ceil(settings.clients / settings.middlewares) + 8
    return spec.parse(
        {
            "name": NAME,
            "system": {
                "middleware": settings.middlewares,
                "pool_size": defaults.SERVE.pool.max_size,
                "max_clients": max(defaults.SERVE.max_clients, per_middleware),
                "client_processes": settings.processes,
                "durable": True,
            },
            "workload": {
                "mix": {BEHAVIOUR: settings.clients},
                "message_size": defaults.MESSAGE_SIZE,
            },
            "run": {
                "duration_s": settings.warmup_s + settings.duration_s + COOLDOWN_S,
                "warmup_s": settings.warmup_s,
                "cooldown_s": COOLDOWN_S,
            },
        }
    )


@dataclass(frozen=True, slots=True)
class Summary:
    """Requests of one operation (or of all: ``operation == "all"``)."""

    operation: str
    requests: int
    requests_per_s: float
    latency: results.Latency | None


@dataclass(frozen=True, slots=True)
class StandardResult:
    measured_s: float
    overall: Summary
    operations: tuple[Summary, ...]
    statuses: dict[str, int]
    pace: results.Pace | None = None

    def as_json(self, settings: Settings) -> dict[str, Any]:
        summaries = [self.overall, *self.operations]
        return {
            "benchmark": "standard",
            "spec": settings.as_json(),
            "environment": results.environment({}, self.pace),
            "measured_s": self.measured_s,
            "cycles_per_s": self.overall.requests_per_s / 12,
            "statuses": self.statuses,
            "results": [_summary_json(summary) for summary in summaries],
        }


def _summary_json(summary: Summary) -> dict[str, Any]:
    latency = summary.latency
    return {
        "operation": summary.operation,
        "requests": summary.requests,
        "requests_per_s": summary.requests_per_s,
        "latency": None if latency is None else {
            "p50_ms": latency.p50_ms, "p90_ms": latency.p90_ms, "p99_ms": latency.p99_ms,
        },
    }  # fmt: skip


async def run(
    settings: Settings, out: Path, reporter: runner.Reporter | None = None
) -> StandardResult:
    """Run the experiment under ``out`` and summarise its records."""
    pace_at_start = host.pace_ms()
    options = runner.RunnerOptions(out=out, overwrite=True)
    directory = await runner.run_experiment(experiment(settings), options, reporter)
    return dataclasses.replace(summarise(directory), pace=results.Pace.since(pace_at_start))


def summarise(experiment_dir: Path) -> StandardResult:
    """The measured interval of the experiment's (only) run, from its client records."""
    manifest = manifest_.load(experiment_dir)
    run = manifest.runs[0]
    assert run.start_ns is not None and run.end_ns is not None, "the runner marks both"
    bounds = trimming.bounds_for(run, run.start_ns, run.end_ns, None)
    frame = _client_requests(experiment_dir / run.run_id).to_pandas()
    kept = frame[
        (frame["behaviour"] == BEHAVIOUR)
        & (frame["start_ns"] >= bounds.keep_from_ns)
        & (frame["start_ns"] < bounds.keep_until_ns)
    ]
    seconds = bounds.measured_s
    operations = tuple(
        _summary(name, group["response_ns"].to_numpy(), seconds)
        for name, group in kept.groupby("operation", sort=True)
    )
    overall = _summary("all", kept["response_ns"].to_numpy(), seconds)
    statuses = {str(k): int(v) for k, v in kept["status"].value_counts().sort_index().items()}
    return StandardResult(seconds, overall, operations, statuses)


def _client_requests(run_dir: Path) -> pyarrow.Table:
    paths = sorted((run_dir / record_schema.CLIENT_REQUESTS).glob("*.parquet"))
    if not paths:
        raise runner.RunnerError(f"no client records in {run_dir}")
    return pyarrow.concat_tables([pyarrow.parquet.read_table(path) for path in paths])


def _summary(operation: str, response_ns: Any, seconds: float) -> Summary:
    latencies = numpy.asarray(response_ns, dtype=numpy.int64)
    return Summary(
        operation, int(latencies.size), latencies.size / seconds, results.percentiles(latencies)
    )
