"""Generated experiment directories, for tests, benchmarks and demos.

``write_experiment(path)`` writes a manifest and every record kind for a full
factorial design, with records drawn from numpy's generator: response times are
built from server-side components plus network and codec time, so every field is
consistent with its definition in ``courier.measurements.record_schema``; the
manifest and the record files are written through ``courier.measurements``, like
the lab's. Each factor level multiplies latency (level index i scales it by
``1 + latency_step * i``), so the factor analyses have effects to find. Large runs
are written in chunks, one row group each.

    >>> from pathlib import Path
    >>> import tempfile
    >>> root = write_experiment(Path(tempfile.mkdtemp()) / "exp", requests_per_run=100)
    >>> (root / "manifest.json").is_file()
    True
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from courier.measurements import manifest, parquet, record_schema

NS_PER_S = 1_000_000_000
BASE_START_NS = 1_750_000_000 * NS_PER_S
DEFAULT_FACTORS: dict[str, list[Any]] = {"clients": [1, 8]}


@dataclass(frozen=True)
class Shape:
    """What each run of a generated experiment looks like."""

    requests_per_run: int = 2_000
    duration_s: float = 30.0
    warmup_s: float = 5.0
    cooldown_s: float = 5.0
    clients: int = 4
    instances: tuple[str, ...] = ("127.0.0.1:7400", "127.0.0.1:7401")
    operations: tuple[str, ...] = ("send", "pop", "peek")
    error_rate: float = 0.01
    latency_step: float = 0.5
    depth_trend_per_s: float = 0.0
    kinds: tuple[str, ...] = tuple(
        kind for kind in record_schema.FIELDS if kind not in record_schema.CLUSTER_KINDS
    )  # what a lab run records (a cluster experiment's controller adds its own)
    chunk_rows: int = 1_000_000


def write_experiment(
    path: Path,
    *,
    name: str = "synthetic",
    factors: Mapping[str, Sequence[Any]] | None = None,
    replications: int = 1,
    seed: int = 0,
    arrival: str = "closed",
    **shape: Any,
) -> Path:
    """Write a generated experiment directory at ``path`` and return it.

    ``arrival`` goes into the spec's ``[workload]`` like the lab's (an ``arrival``
    factor overrides it per run). Keyword arguments beyond these override fields
    of ``Shape``.
    """
    form = Shape(**shape)
    declared = {k: list(v) for k, v in (DEFAULT_FACTORS if factors is None else factors).items()}
    rng = np.random.default_rng(seed)
    written = _manifest(path, name, declared, form, seed, arrival)
    combos = list(itertools.product(*declared.values())) if declared else [()]
    for index, (combo, replication) in enumerate(itertools.product(combos, range(replications))):
        levels = dict(zip(declared, combo, strict=True))
        scale = _latency_scale(levels, declared, form.latency_step)
        span = _span(f"r{index:03d}", index, form)
        _write_run(path / span.run_id, span, scale, form, rng)
        written = written.with_run(
            manifest.Run(span.run_id, levels, replication, form.warmup_s, form.cooldown_s,
                         span.start_ns, span.end_ns)
        )  # fmt: skip
    written.write()
    return path


def _latency_scale(
    levels: Mapping[str, Any], declared: Mapping[str, list[Any]], step: float
) -> float:
    scale = 1.0
    for factor, level in levels.items():
        scale *= 1.0 + step * declared[factor].index(level)
    return scale


@dataclass(frozen=True)
class _Span:
    run_id: str
    start_ns: int
    end_ns: int


def _span(run_id: str, index: int, form: Shape) -> _Span:
    start = BASE_START_NS + index * round((form.duration_s + 1) * NS_PER_S)
    return _Span(run_id, start, start + round(form.duration_s * NS_PER_S))


def _manifest(
    path: Path, name: str, declared: dict[str, list[Any]], form: Shape, seed: int, arrival: str
) -> manifest.Manifest:
    spec = {
        "generator": "courier.analysis.synthetic",
        "seed": seed,
        "requests_per_run": form.requests_per_run,
        "duration_s": form.duration_s,
        "workload": {"arrival": arrival},
    }
    return manifest.Manifest(
        manifest.path_in(path), name, declared, spec=spec, packages={}, machine={"generated": True}
    )


# The generated processes whose files hold each kind (e.g. load-0.parquet).
_PROCESSES = {record_schema.CLIENT_REQUESTS: "load", record_schema.SERVER_REQUESTS: "serve"}


def _write_run(
    run_dir: Path, run: _Span, scale: float, form: Shape, rng: np.random.Generator
) -> None:
    writers = {
        kind: parquet.RecordWriter(run_dir, _PROCESSES.get(kind, "monitor"), [kind])
        for kind in form.kinds
    }

    def write(kind: str, columns: dict[str, Any]) -> None:
        if kind in writers:
            writers[kind].write_columns(kind, columns)

    fifo = _Fifo()
    for first in range(0, form.requests_per_run, form.chunk_rows):
        n = min(form.chunk_rows, form.requests_per_run - first)
        client, server = _requests(run, first, n, scale, form, rng)
        fifo.deliver(client, rng)
        server["status"] = client["status"]
        write(record_schema.CLIENT_REQUESTS, client)
        write(record_schema.SERVER_REQUESTS, server)
    seconds = np.arange(int(form.duration_s), dtype=np.int64)
    samples = run.start_ns + seconds * NS_PER_S + NS_PER_S // 2
    write(record_schema.RESOURCES, _resources(run, samples, form, rng))
    write(record_schema.GC_PAUSES, _gc_pauses(run, form, rng))
    write(record_schema.DB_STATS, _db_stats(run, samples, rng))
    write(record_schema.QUEUE_DEPTHS, _depths(run, samples, form, rng))
    for writer in writers.values():
        writer.close()


def _durations(rng: np.random.Generator, median_us: float, n: int, scale: float) -> np.ndarray:
    """Log-normal durations in nanoseconds, at least 1 µs."""
    values = rng.lognormal(np.log(median_us * 1_000 * scale), 0.5, n)
    return np.maximum(values, 1_000).astype(np.int64)


def _requests(
    run: _Span, first: int, n: int, scale: float, form: Shape, rng: np.random.Generator
) -> tuple[dict[str, Any], dict[str, Any]]:
    client_ids = rng.integers(1, form.clients + 1, n)
    operations = np.asarray(form.operations)[rng.integers(0, len(form.operations), n)]
    status = _statuses(operations, form, rng)
    servers = np.asarray(form.instances)[client_ids % len(form.instances)]
    # Each chunk covers its own slice of the run, so that time runs on across chunks.
    span = run.end_ns - run.start_ns
    begin = run.start_ns + span * first // form.requests_per_run
    start = begin + np.sort(rng.integers(0, span * n // form.requests_per_run, n))
    server = {
        "run_id": np.full(n, run.run_id),
        "instance": servers,
        "client_id": client_ids,
        "request_id": np.arange(first, first + n, dtype=np.int64),
        "operation": operations,
        "status": status,
        "queued_ns": _durations(rng, 50, n, scale),
        "pool_wait_ns": _durations(rng, 30, n, scale),
        "db_exec_ns": _durations(rng, 200, n, scale),
        "deserialize_ns": _durations(rng, 5, n, 1.0),
        "serialize_ns": _durations(rng, 5, n, 1.0),
    }
    db_rest = _durations(rng, 100, n, scale)
    server["db_round_trip_ns"] = server["db_exec_ns"] + db_rest
    server_other = _durations(rng, 20, n, 1.0)
    server["total_ns"] = (
        server["queued_ns"]
        + server["pool_wait_ns"]
        + server["db_round_trip_ns"]
        + server["deserialize_ns"]
        + server["serialize_ns"]
        + server_other
    )
    client = {
        "run_id": server["run_id"],
        "process": np.char.add("load-", (client_ids % 2).astype(str)),
        "behaviour": np.full(n, "mixed"),
        "server": servers,
        "client_id": client_ids,
        "request_id": server["request_id"],
        "operation": operations,
        "status": status,
        "start_ns": start,
        "serialize_ns": _durations(rng, 8, n, 1.0),
        "deserialize_ns": _durations(rng, 8, n, 1.0),
        "bytes_sent": rng.integers(24, 512, n),
        "bytes_received": rng.integers(16, 512, n),
    }
    network = _durations(rng, 80, n, 1.0)
    client["response_ns"] = (
        client["serialize_ns"] + client["deserialize_ns"] + network + server["total_ns"]
    )
    server["receive_ns"] = start + client["serialize_ns"] + network // 2
    return client, server


class _Fifo:
    """One FIFO of messages across a run's chunks: sends store, pops take, peeks look.

    An ok send stores a new message in a random queue; a pop (or peek) that is not an
    error takes (or sees) the oldest message waiting, and finds the queue empty when
    none is. Vectorised: the number waiting is the reflected walk of the sends minus
    the pops, so a pop finds a message exactly when the walk was above zero before it.
    Messages still waiting at the end of the run are its backlog.
    """

    QUEUES = 3

    def __init__(self) -> None:
        self.waiting_ids = np.zeros(0, dtype=np.int64)
        self.waiting_queues = np.zeros(0, dtype=np.int64)
        self.next_id = 1

    def deliver(self, client: dict[str, Any], rng: np.random.Generator) -> None:
        """Sets status, message_ids and queue_ids of one chunk's client requests."""
        operations, status = client["operation"], client["status"]
        live = status != "QUEUE_NOT_FOUND"
        sends = live & (operations == "send")
        pops, peeks = live & (operations == "pop"), live & (operations == "peek")
        new_ids = self.next_id + np.arange(int(sends.sum()), dtype=np.int64)
        self.next_id += len(new_ids)
        new_queues = rng.integers(1, self.QUEUES + 1, len(new_ids))
        waiting_ids = np.concatenate([self.waiting_ids, new_ids])
        waiting_queues = np.concatenate([self.waiting_queues, new_queues])
        walk = len(self.waiting_ids) + np.cumsum(sends.astype(np.int64) - pops)
        depth = walk - np.minimum(np.minimum.accumulate(walk), 0)  # reflected at zero
        before = np.concatenate([[len(self.waiting_ids)], depth[:-1]])
        found = (pops | peeks) & (before > 0)
        taken = np.cumsum(pops & found) - (pops & found)  # messages taken before each row
        index = np.zeros(len(operations), dtype=np.int64)
        index[found] = taken[found]  # the oldest waiting message
        index[sends] = len(self.waiting_ids) + np.arange(len(new_ids))
        has_id = found | sends
        status[(pops | peeks) & ~found] = "QUEUE_EMPTY"
        status[found] = "OK"
        offsets = pa.array(np.concatenate([[0], np.cumsum(has_id)]), pa.int32())
        ids, queues = waiting_ids[index[has_id]], waiting_queues[index[has_id]]
        client["message_ids"] = pa.ListArray.from_arrays(offsets, pa.array(ids))
        client["queue_ids"] = pa.ListArray.from_arrays(offsets, pa.array(queues))
        used = int((pops & found).sum())
        self.waiting_ids, self.waiting_queues = waiting_ids[used:], waiting_queues[used:]


def _statuses(operations: np.ndarray, form: Shape, rng: np.random.Generator) -> np.ndarray:
    """OK, or an error at ``error_rate``; the FIFO decides which reads find nothing."""
    status = np.full(len(operations), "OK", dtype=object)
    status[rng.random(len(operations)) < form.error_rate] = "QUEUE_NOT_FOUND"
    return status


def _processes(form: Shape) -> list[tuple[str, str]]:
    return [("load-0", "client"), ("load-1", "client"), ("postgres", "database")] + [
        (f"serve-{instance}", "middleware") for instance in form.instances
    ]


def _resources(
    run: _Span, samples: np.ndarray, form: Shape, rng: np.random.Generator
) -> dict[str, Any]:
    processes = _processes(form)
    count = len(samples)
    return {
        "run_id": np.full(count * len(processes), run.run_id),
        "process": np.repeat([p for p, _ in processes], count),
        "tier": np.repeat([t for _, t in processes], count),
        "ts_ns": np.tile(samples, len(processes)),
        "cpu_percent": rng.uniform(5, 95, count * len(processes)),
        "rss_bytes": rng.integers(50, 200, count * len(processes)) * 2**20,
    }


def _gc_pauses(run: _Span, form: Shape, rng: np.random.Generator) -> dict[str, Any]:
    n = max(1, int(form.duration_s))
    span = run.end_ns - run.start_ns
    return {
        "run_id": np.full(n, run.run_id),
        "process": np.asarray(["load-0", "load-1"])[rng.integers(0, 2, n)],
        "ts_ns": run.start_ns + np.sort(rng.integers(0, span, n)),
        "generation": rng.integers(0, 3, n).astype(np.int32),
        "duration_ns": _durations(rng, 500, n, 1.0),
        "collected": rng.integers(0, 5_000, n),
    }


def _db_stats(run: _Span, samples: np.ndarray, rng: np.random.Generator) -> dict[str, Any]:
    count = len(samples)
    return {
        "run_id": np.full(count, run.run_id),
        "ts_ns": samples,
        "db_size_bytes": 8 * 2**20 + np.cumsum(rng.integers(0, 4096, count)),
        "xact_commit": np.cumsum(rng.integers(100, 200, count)),
        "xact_rollback": np.cumsum(rng.integers(0, 2, count)),
        "messages": rng.poisson(100, count),
    }


def _depths(
    run: _Span, samples: np.ndarray, form: Shape, rng: np.random.Generator
) -> dict[str, Any]:
    queues = np.arange(1, 4, dtype=np.int64)
    elapsed = np.repeat((samples - run.start_ns) / NS_PER_S, len(queues))
    trend = np.round(form.depth_trend_per_s * elapsed / len(queues)).astype(np.int64)
    return {
        "run_id": np.full(len(elapsed), run.run_id),
        "ts_ns": np.repeat(samples, len(queues)),
        "queue_id": np.tile(queues, len(samples)),
        "messages": rng.poisson(30, len(elapsed)) + trend,
    }


def kinds_except(*excluded: str) -> tuple[str, ...]:
    """All record kinds but the given ones (for ``kinds=``)."""
    return tuple(kind for kind in record_schema.FIELDS if kind not in excluded)
