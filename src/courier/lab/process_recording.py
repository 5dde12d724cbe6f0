"""Everything one process records, behind one object.

A ``ProcessRecording`` owns the process's ``RecordWriter``, samples its CPU and
memory once per second, records its GC pauses, and turns the per-request timings
that the client library and the middleware hand to their ``recorder`` callables
(plain tuples, kept as they come) into CLIENT_REQUESTS and SERVER_REQUESTS rows.

    recording = ProcessRecording.for_middleware(record_dir, run_id, "127.0.0.1:7401")
    server = Server(settings, recorder=recording.server_recorder())
    ...
    recording.close()          # on shutdown: flushes and finishes every file

Clock offsets: every instant is written as ``time.time_ns() - clock_offset_ns``,
where ``clock_offset_ns`` is this host's clock minus the experiment's reference
clock (zero on the runner's host; see docs/measurements.md, "Clock alignment").
"""

from __future__ import annotations

import gc
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

import psutil

from courier.lab import probes
from courier.measurements import parquet, record_schema

if TYPE_CHECKING:  # the hooks' record types, for the type checker only
    from courier.client import measurement_hook as client_hook
    from courier.server import measurement_hook as server_hook

CLIENT_KINDS = (record_schema.CLIENT_REQUESTS, record_schema.RESOURCES, record_schema.GC_PAUSES)
MIDDLEWARE_KINDS = (record_schema.SERVER_REQUESTS, record_schema.RESOURCES, record_schema.GC_PAUSES)
RUNNER_KINDS = (
    record_schema.RESOURCES, record_schema.GC_PAUSES, record_schema.DB_STATS,
    record_schema.QUEUE_DEPTHS,
)  # fmt: skip


class ProcessRecording:
    def __init__(
        self,
        run_dir: Path,
        run_id: str,
        process: str,
        tier: str,
        kinds: Iterable[str],
        *,
        clock_offset_ns: int = 0,
        extra_targets: Iterable[probes.SampleTarget] = (),
        flush_interval: float = parquet.DEFAULT_FLUSH_INTERVAL,
        sample_interval: float = probes.SAMPLE_INTERVAL,
    ) -> None:
        self.run_id = run_id
        self.process = process
        self.clock_offset_ns = clock_offset_ns
        self.writer = parquet.RecordWriter(run_dir, process, kinds, flush_interval=flush_interval)
        own = probes.SampleTarget(process, tier, psutil.Process())
        self.sampler = probes.ResourceSampler(
            self.writer.append,
            run_id,
            [own, *extra_targets],
            interval=sample_interval,
            clock_offset_ns=clock_offset_ns,
        )
        self.gc_pauses = probes.GcPauseRecorder(
            self.writer.append, run_id, process, clock_offset_ns=clock_offset_ns
        )
        self._hook_rows: dict[tuple[str, ...], parquet.RecordBuffer] = {}
        self._closed = False

    @classmethod
    def for_middleware(
        cls, record_dir: Path, run_id: str, instance: str, *, clock_offset_ns: int = 0
    ) -> ProcessRecording:
        """What `courier serve --record-dir DIR --run-id ID` records; already started."""
        return cls(
            record_dir, run_id, instance, "middleware", MIDDLEWARE_KINDS,
            clock_offset_ns=clock_offset_ns,
        ).start()  # fmt: skip

    @classmethod
    def for_clients(
        cls, record_dir: Path, run_id: str, process: str, *, clock_offset_ns: int = 0
    ) -> ProcessRecording:
        """What a load-generator process records; already started."""
        return cls(
            record_dir, run_id, process, "client", CLIENT_KINDS, clock_offset_ns=clock_offset_ns
        ).start()

    def start(self) -> ProcessRecording:
        """Start the writer, and the probes whose kinds this recording has."""
        self.writer.start()
        if record_schema.RESOURCES in self.writer.buffers:
            self.sampler.start()
        if record_schema.GC_PAUSES in self.writer.buffers:
            self.gc_pauses.install()
        # Unrecorded, a serving process frees what it allocates and the collector
        # hardly runs; the rows held here until each flush make it run. Spare those
        # collections the objects that already live for good (modules, pyarrow's
        # tables, the process's start-up state): a full one would otherwise stall
        # the process for tens of milliseconds. close() gives them back.
        gc.freeze()
        return self

    def close(self) -> list[Path]:
        """Stop the probes and finish every file; safe to call twice."""
        if self._closed:
            return []
        self._closed = True
        self.gc_pauses.uninstall()
        self.sampler.stop()
        gc.unfreeze()
        return self.writer.close()

    def __enter__(self) -> ProcessRecording:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def append(self, kind: str, row: tuple[Any, ...]) -> None:
        self.writer.append(kind, row)

    def server_recorder(self) -> server_hook.Recorder:
        """The middleware's per-request ``recorder``: a SERVER_REQUESTS row each."""
        leading = (self.run_id, self.process)
        return self._rows(record_schema.SERVER_REQUESTS, leading).append_unchecked

    def client_recorder(
        self, behaviour: str, counter: RequestCounter | None = None
    ) -> client_hook.Recorder:
        """A ``recorder`` for one ``courier.AsyncClient``: a CLIENT_REQUESTS row each,
        tagged with the client's behaviour, and one more in ``counter.requests``."""
        leading = (self.run_id, self.process, behaviour)
        append = self._rows(record_schema.CLIENT_REQUESTS, leading).append_unchecked
        if counter is None:
            return append

        def record_and_count(row: client_hook.CallRow) -> None:
            counter.requests += 1
            append(row)

        return record_and_count

    def _rows(self, kind: str, leading: tuple[str, ...]) -> parquet.RecordBuffer:
        """The buffer for a hook's rows, which are kept as they come (see RecordBuffer):
        one per distinct leading values, so a request costs one deque append."""
        assert kind in self.writer.buffers, f"no {kind} here"
        key = (kind, *leading)
        rows = self._hook_rows.get(key)
        if rows is None:
            rows = self.writer.add_buffer(kind, leading, self.clock_offset_ns)
            self._hook_rows[key] = rows
        return rows


class RequestCounter(Protocol):
    requests: int
