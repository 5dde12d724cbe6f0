"""Everything one process records, behind one object.

A ``ProcessRecording`` owns the process's ``RecordWriter``, samples its CPU and
memory once per second, records its GC pauses, and turns the per-request timings
that the client library and the middleware hand to their ``recorder`` callables
into CLIENT_REQUESTS and SERVER_REQUESTS rows.

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

from courier.lab import probes, recorder, records

if TYPE_CHECKING:  # the hooks' record types, for the type checker only
    from courier.client import recording as client_recording
    from courier.server import recording as server_recording

CLIENT_KINDS = (records.CLIENT_REQUESTS, records.RESOURCES, records.GC_PAUSES)
MIDDLEWARE_KINDS = (records.SERVER_REQUESTS, records.RESOURCES, records.GC_PAUSES)
RUNNER_KINDS = (records.RESOURCES, records.GC_PAUSES, records.DB_STATS, records.QUEUE_DEPTHS)
LOGIN_OPERATION = "login"


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
        flush_interval: float = recorder.DEFAULT_FLUSH_INTERVAL,
        sample_interval: float = probes.SAMPLE_INTERVAL,
    ) -> None:
        self.run_id = run_id
        self.process = process
        self.clock_offset_ns = clock_offset_ns
        self.writer = recorder.RecordWriter(run_dir, process, kinds, flush_interval=flush_interval)
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
        self._client_rows: dict[str, recorder.RecordBuffer] = {}  # by behaviour
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
        if records.RESOURCES in self.writer.buffers:
            self.sampler.start()
        if records.GC_PAUSES in self.writer.buffers:
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

    def server_recorder(self) -> server_recording.Recorder:
        """The middleware's per-request ``recorder``: a SERVER_REQUESTS row each.

        It keeps the ``RequestRow`` as it is (its values are the row's, after run id
        and instance): one deque append per request.
        """
        assert records.SERVER_REQUESTS in self.writer.buffers, "no server_requests here"
        leading = (self.run_id, self.process)
        rows = self.writer.add_buffer(records.SERVER_REQUESTS, leading, self.clock_offset_ns)
        return rows.append_unchecked

    def client_recorder(
        self, behaviour: str, counter: RequestCounter | None = None
    ) -> ClientRecorder:
        """A ``recorder`` for one ``courier.AsyncClient``, tagging rows with a behaviour."""
        assert records.CLIENT_REQUESTS in self.writer.buffers, "no client_requests here"
        rows = self._client_rows.get(behaviour)
        if rows is None:  # one buffer per behaviour: its rows differ in the leading values
            leading = (self.run_id, self.process, behaviour)
            rows = self.writer.add_buffer(records.CLIENT_REQUESTS, leading, self.clock_offset_ns)
            self._client_rows[behaviour] = rows
        return ClientRecorder(rows, counter)


class RequestCounter(Protocol):
    requests: int


class ClientRecorder:
    """One client's ``recorder``: a CLIENT_REQUESTS row per call, and a request count.

    The rows are the ``CallRecord``s' values as plain tuples (see ``RecordBuffer``),
    in the buffer of the client's behaviour (the record's fields are the row's, after
    run id, process and behaviour). The middleware records a LOGIN under the id it
    logs in, while the client library records it before it knows that id (as 0); the
    login record is held back until ``logged_in`` so both sides carry the same
    (client_id, request_id).
    """

    def __init__(self, rows: recorder.RecordBuffer, counter: RequestCounter | None = None) -> None:
        self._append = rows.append_unchecked
        self._counter = counter
        self._held: list[client_recording.CallRecord] = []

    def __call__(self, call: client_recording.CallRecord) -> None:
        if self._counter is not None:
            self._counter.requests += 1
        if call.client_id == 0 and call.operation == LOGIN_OPERATION:
            self._held.append(call)
        else:
            self._append(tuple(call))  # plain: see RecordBuffer

    def logged_in(self, client_id: int) -> None:
        """Write the held LOGIN record under the id it logged in."""
        held, self._held = self._held, []
        for call in held:
            self._append(tuple(call._replace(client_id=client_id) if call.status == "OK" else call))
