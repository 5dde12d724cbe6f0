"""Per-process probes: CPU and memory once per second, and every garbage-collector pause."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psutil

from courier.measurements import record_schema

RowSink = Callable[[str, tuple[Any, ...]], None]
"""Where probes put rows: ``sink(kind, row)``, e.g. ``RecordWriter.append``."""

SAMPLE_INTERVAL = 1.0


@dataclass(slots=True)
class SampleTarget:
    """One operating-system process to sample, and how to label its rows."""

    name: str
    tier: str
    process: psutil.Process
    with_children: bool = False  # e.g. PostgreSQL: the postmaster and its backends
    _children: dict[int, psutil.Process] = field(default_factory=dict)

    def sample(self) -> tuple[float, int]:
        """CPU percent since the previous sample (100 = one core) and resident bytes."""
        members = [self.process, *self._current_children()]
        cpu, rss = 0.0, 0
        for member in members:
            try:
                cpu += member.cpu_percent(None)
                rss += member.memory_info().rss
            except psutil.NoSuchProcess:
                continue
        return cpu, rss

    def _current_children(self) -> list[psutil.Process]:
        if not self.with_children:
            return []
        try:
            alive = {child.pid: child for child in self.process.children(recursive=True)}
        except psutil.NoSuchProcess:
            return []
        # Keep the objects we already know: cpu_percent needs the previous reading.
        self._children = {pid: self._children.get(pid, child) for pid, child in alive.items()}
        return list(self._children.values())


class ResourceSampler:
    """Writes one RESOURCES row per target every ``interval`` seconds from a thread."""

    def __init__(
        self,
        sink: RowSink,
        run_id: str,
        targets: list[SampleTarget],
        *,
        interval: float = SAMPLE_INTERVAL,
        clock_offset_ns: int = 0,
    ) -> None:
        self.sink = sink
        self.run_id = run_id
        self.targets = targets
        self.interval = interval
        self.clock_offset_ns = clock_offset_ns
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> ResourceSampler:
        for target in self.targets:
            target.sample()  # prime cpu_percent: its first reading is meaningless
        self._thread = threading.Thread(target=self._run, name="resource-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling, taking one last sample so short processes have a row too."""
        self._stop.set()
        if self._thread is not None:  # started
            self._thread.join()
            self._thread = None
            self.sample_once()

    def sample_once(self) -> None:
        ts_ns = time.time_ns() - self.clock_offset_ns
        for target in self.targets:
            cpu, rss = target.sample()
            self.sink(
                record_schema.RESOURCES, (self.run_id, target.name, target.tier, ts_ns, cpu, rss)
            )

    def _run(self) -> None:
        next_at = time.monotonic() + self.interval
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            self.sample_once()
            next_at += self.interval


class GcPauseRecorder:
    """Records every collection of this process as a GC_PAUSES row (via gc.callbacks).

    Collections never overlap (the interpreter runs one at a time), so the start of
    the current one can live in plain attributes.
    """

    def __init__(
        self, sink: RowSink, run_id: str, process: str, *, clock_offset_ns: int = 0
    ) -> None:
        self.sink = sink
        self.run_id = run_id
        self.process = process
        self.clock_offset_ns = clock_offset_ns
        self._started_wall_ns = 0
        self._started_ns = 0

    def install(self) -> GcPauseRecorder:
        gc.callbacks.append(self._on_gc)
        return self

    def uninstall(self) -> None:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started_wall_ns = time.time_ns()
            self._started_ns = time.perf_counter_ns()
            return
        if not self._started_ns:
            return  # installed in the middle of a collection
        duration_ns = time.perf_counter_ns() - self._started_ns
        self._started_ns = 0
        row = (
            self.run_id,
            self.process,
            self._started_wall_ns - self.clock_offset_ns,
            info["generation"],
            duration_ns,
            info["collected"],
        )
        self.sink(record_schema.GC_PAUSES, row)
