"""Buffered Parquet recording, kept off the hot path.

A ``RecordWriter`` belongs to one process. Recording a row appends it to an
in-memory buffer (a deque append, tens of nanoseconds); a background thread takes
the buffered rows once per ``flush_interval``, turns them into columns and writes
each kind's rows as one row group to ``<run>/<kind>/<process>-<n>.parquet``. A
file is written under a hidden name (``.<process>-<n>.parquet.partial``, which
Spark skips) and renamed when it is complete: on close, and every
``roll_interval`` seconds, so that a process that dies loses at most the file it
was writing.
"""

from __future__ import annotations

import collections
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from courier.measurements import record_schema

DEFAULT_FLUSH_INTERVAL = 1.0
DEFAULT_ROLL_INTERVAL = 60.0
_UNSAFE_FILE_CHARACTERS = re.compile(r"[^A-Za-z0-9_.-]+")


def file_stem(process: str) -> str:
    """A process name made safe for a file name (Spark paths reject ``:``)."""
    return _UNSAFE_FILE_CHARACTERS.sub("_", process).strip("_.") or "process"


class RecordBuffer:
    """Rows of one record kind, held in memory until the writer takes them.

    The rows wait in a deque: its ``append`` and ``popleft`` are atomic, so rows may
    be added from any thread (the GC callback runs in whichever thread triggered a
    collection) while the writer's thread takes them, with no lock. The writer's
    thread turns the rows it takes into Arrow columns in one call (as a struct array:
    half the cost of transposing them in Python first).

    The request hooks hand over their rows as they come (a client's ``CallRow`` and a
    middleware's ``RequestRow`` hold the kind's fields after the first few): such a buffer is
    given the ``leading`` values, the same for all its rows (run id, process, ...),
    and the ``clock_offset_ns`` to subtract from its rows' instants. Both are applied
    to whole columns when the rows are taken, so a request costs one deque append
    (``append_unchecked``). Rows should be plain tuples: the garbage collector stops
    tracking a plain tuple of plain values at its first collection, but never a named
    tuple, and thousands of those waiting here would be traversed by every collection.
    """

    def __init__(self, kind: str, leading: tuple[Any, ...] = (), clock_offset_ns: int = 0) -> None:
        self.kind = kind
        self.schema = record_schema.arrow_schema(kind)
        self.leading = leading
        self.clock_offset_ns = clock_offset_ns
        appended = list(self.schema)[len(leading) :]
        self._width = len(appended)
        self._row_type = pa.struct(appended)
        self._instants = [
            n for n, f in enumerate(appended) if f.name in record_schema.INSTANT_FIELDS
        ]
        self._rows: collections.deque[tuple[Any, ...]] = collections.deque()
        self.append_unchecked: Callable[[tuple[Any, ...]], None] = self._rows.append
        """Add a hook's row, whose type fixes its width: no check, a single C call."""

    def append(self, row: tuple[Any, ...]) -> None:
        """Add one row; values in the order of ``record_schema.FIELDS[kind]``, after the
        leading ones."""
        if len(row) != self._width:
            raise ValueError(f"{self.kind} rows have {self._width} values, got {len(row)}")
        self._rows.append(row)

    def __len__(self) -> int:
        return len(self._rows)

    def take(self) -> pa.Table | None:
        """Take the buffered rows out and return them as a table (None when empty)."""
        waiting = self._rows
        taken = [waiting.popleft() for _ in range(len(waiting))]
        return self._table(taken) if taken else None

    def _table(self, taken: list[tuple[Any, ...]]) -> pa.Table:
        rows = cast(pa.StructArray, pa.array(taken, type=self._row_type))
        columns: list[pa.Array[Any]] = rows.flatten()
        if self.clock_offset_ns:
            for n in self._instants:
                columns[n] = pc.subtract(columns[n], self.clock_offset_ns)
        leading = [
            pa.repeat(pa.scalar(value, field.type), len(taken))
            for value, field in zip(self.leading, self.schema, strict=False)
        ]
        return pa.Table.from_arrays([*leading, *columns], schema=self.schema)


DELTA = "DELTA_BINARY_PACKED"


def _whole_number_columns(schema: pa.Schema) -> list[str]:
    """The columns of whole numbers, by their Parquet paths (a list's values are its
    ``.list.element``): those delta encoding packs."""
    found = []
    for field in schema:
        if pa.types.is_list(field.type) and pa.types.is_integer(field.type.value_type):
            found.append(f"{field.name}.list.element")
        elif pa.types.is_integer(field.type):
            found.append(field.name)
    return found


class _KindFile:
    """The Parquet file of one kind currently being written, and its rollover."""

    def __init__(self, directory: Path, stem: str, schema: pa.Schema) -> None:
        self.directory = directory
        self.stem = stem
        self.schema = schema
        self.written_paths: list[Path] = []
        self._writer: pq.ParquetWriter | None = None
        self._partial: Path | None = None
        self._final: Path | None = None
        self._opened_at = 0.0

    def write(self, table: pa.Table) -> None:
        if self._writer is None:
            self._open()
        assert self._writer is not None
        self._writer.write_table(table)

    def ensure_written(self) -> None:
        """Write an empty file if this kind never had a row."""
        if self._writer is None and not self.written_paths:
            self.write(self.schema.empty_table())

    def roll_if_older_than(self, seconds: float) -> None:
        if self._writer is not None and time.monotonic() - self._opened_at >= seconds:
            self.close()

    def close(self) -> None:
        if self._writer is None:
            return
        assert self._partial is not None and self._final is not None
        self._writer.close()
        os.replace(self._partial, self._final)
        self.written_paths.append(self._final)
        self._writer = None

    def _open(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._final, self._partial = self._claim_name()
        # Dictionaries for the text columns, whose values repeat; for the numbers,
        # nearly all distinct, building one would triple the cost of a write. Whole
        # numbers (instants, durations, ids) are delta-encoded and nothing is
        # compressed: half the size of snappy's plain values, cheaper to write, and
        # Spark reads them in half the time, as decompression was most of a scan
        # (docs/measurements.md, "Pipeline speed"). (The stubs know only a bool for
        # ``use_dictionary``; pyarrow documents a list of column names too.)
        text = [field.name for field in self.schema if field.type == pa.string()]
        self._writer = pq.ParquetWriter(
            self._partial,
            self.schema,
            compression="none",
            use_dictionary=text,  # type: ignore[arg-type]
            column_encoding={name: DELTA for name in _whole_number_columns(self.schema)},
        )
        self._opened_at = time.monotonic()

    def _claim_name(self) -> tuple[Path, Path]:
        """The first free ``<stem>-<n>``; claimed atomically, so processes never collide."""
        for n in range(1_000_000):
            final = self.directory / f"{self.stem}-{n}.parquet"
            partial = self.directory / f".{self.stem}-{n}.parquet.partial"
            if final.exists():
                continue
            try:
                os.close(os.open(partial, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                continue
            return final, partial
        raise RuntimeError(f"no free record file name for {self.stem} in {self.directory}")


class RecordWriter:
    """All record kinds of one process, flushed to Parquet by a background thread.

    Every kind named in ``kinds`` gets at least one file, empty if nothing was
    recorded, so a complete run has every dataset the analysis reads.
    """

    def __init__(
        self,
        run_dir: Path,
        process: str,
        kinds: Iterable[str],
        *,
        flush_interval: float = DEFAULT_FLUSH_INTERVAL,
        roll_interval: float = DEFAULT_ROLL_INTERVAL,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.process = process
        self.flush_interval = flush_interval
        self.roll_interval = roll_interval
        self.buffers = {kind: RecordBuffer(kind) for kind in kinds}
        self._sources = {kind: [buffer] for kind, buffer in self.buffers.items()}
        stem = file_stem(process)
        self._files = {
            kind: _KindFile(self.run_dir / kind, stem, buffer.schema)
            for kind, buffer in self.buffers.items()
        }
        self._write_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.flush_error: BaseException | None = None

    def append(self, kind: str, row: tuple[Any, ...]) -> None:
        self.buffers[kind].append(row)

    def write_columns(self, kind: str, columns: Mapping[str, Any]) -> None:
        """Write whole columns (sequences, numpy or Arrow arrays, by field name) now, as
        one row group: for records generated in bulk rather than recorded one by one."""
        schema = self.buffers[kind].schema
        arrays = [_as_array(columns[field.name], field.type) for field in schema]
        with self._write_lock:
            self._files[kind].write(pa.Table.from_arrays(arrays, schema=schema))

    def add_buffer(
        self, kind: str, leading: tuple[Any, ...], clock_offset_ns: int = 0
    ) -> RecordBuffer:
        """Another buffer for one of the kinds, for rows without the leading values
        (see RecordBuffer); its rows go to the same files."""
        buffer = RecordBuffer(kind, leading, clock_offset_ns)
        with self._write_lock:
            self._sources[kind].append(buffer)
        return buffer

    def start(self) -> RecordWriter:
        # pyarrow's first conversion imports its helpers (a quarter second): do it
        # now, not in the first flush, where it would stall the serving thread.
        pa.array([0], type=pa.int64())
        self._thread = threading.Thread(
            target=self._flush_periodically, name=f"records-{self.process}", daemon=True
        )
        self._thread.start()
        return self

    def flush(self) -> None:
        """Write every buffered row now (the background thread does this periodically)."""
        with self._write_lock:
            for kind, sources in self._sources.items():
                tables = [table for table in map(RecordBuffer.take, sources) if table is not None]
                if tables:
                    self._files[kind].write(pa.concat_tables(tables))
                self._files[kind].roll_if_older_than(self.roll_interval)

    def close(self) -> list[Path]:
        """Stop the thread, write what is left, finish every file; returns their paths."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.flush()
        with self._write_lock:
            for kind_file in self._files.values():
                kind_file.ensure_written()
                kind_file.close()
        return sorted(path for f in self._files.values() for path in f.written_paths)

    def _flush_periodically(self) -> None:
        while not self._stop.wait(self.flush_interval):
            try:
                self.flush()
            except Exception as exc:  # keep the process serving; close() reports it
                self.flush_error = exc
                return


def _as_array(values: Any, type_: pa.DataType) -> pa.Array[Any]:
    """Values as an Arrow array of ``type_``; an Arrow array of that type as it is."""
    if isinstance(values, pa.Array) and values.type == type_:
        return values
    return pa.array(values, type=type_)
