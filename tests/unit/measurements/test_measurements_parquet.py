"""Writing records: column buffers, background flushes into row groups, finished files."""

from __future__ import annotations

import threading
import time
import typing
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from courier.client import measurement_hook as client_hook
from courier.measurements import parquet, record_schema
from courier.server import measurement_hook as server_hook

GC_KIND = record_schema.GC_PAUSES
SETUP_CALL = ("127.0.0.1:7401", 0, 1, "register", "OK", 2_000, 9, 1, 1, 20, 30, (), ())


def gc_row(n: int) -> tuple[object, ...]:
    return ("r000", "proc", 1_000 + n, 2, 10 * n, n)


def wait_flushed(writer: parquet.RecordWriter, timeout: float = 10.0) -> None:
    """Until the background thread has taken every buffered row."""
    deadline = time.monotonic() + timeout
    while any(len(buffer) for buffer in writer.buffers.values()):
        assert time.monotonic() < deadline, "the writer thread did not flush"
        time.sleep(0.01)
    time.sleep(0.05)  # and written them


def read_rows(paths: list[Path]) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for path in paths:
        rows.extend(pq.read_table(path).to_pylist())
    return rows


def test_a_buffer_hands_out_its_rows_once_as_a_typed_table() -> None:
    buffer = parquet.RecordBuffer(GC_KIND)
    for n in range(3):
        buffer.append(gc_row(n))
    table = buffer.take()
    assert table is not None
    assert table.schema == record_schema.arrow_schema(GC_KIND)
    assert table.column("duration_ns").to_pylist() == [0, 10, 20]
    assert buffer.take() is None


def test_a_row_of_the_wrong_width_is_refused() -> None:
    buffer = parquet.RecordBuffer(GC_KIND)
    with pytest.raises(ValueError, match="6 values"):
        buffer.append(("r000", "proc"))
    assert len(buffer) == 0


def test_the_hook_records_are_the_rows_after_their_leading_fields() -> None:
    # The lab keeps each hook's record as it is: its fields must be the row's, in order.
    assert client_hook.CallRecord._fields == tuple(
        record_schema.field_names(record_schema.CLIENT_REQUESTS)[3:]
    )
    assert server_hook.RequestRecord._fields == tuple(
        record_schema.field_names(record_schema.SERVER_REQUESTS)[2:]
    )
    # The plain tuples the hooks hand over have one value per field.
    assert len(typing.get_args(client_hook.CallRow)) == len(client_hook.CallRecord._fields)
    assert len(typing.get_args(server_hook.RequestRow)) == len(server_hook.RequestRecord._fields)


def test_a_hook_buffer_adds_the_leading_values_and_corrects_the_instants() -> None:
    buffer = parquet.RecordBuffer(record_schema.SERVER_REQUESTS, ("r000", "127.0.0.1:7401"), 500)
    for n in range(2):
        buffer.append_unchecked((7, n, "send", "OK", 10_000 + n, 1, 2, 3, 4, 5, 6, 7))
    table = buffer.take()
    assert table is not None and table.schema == record_schema.arrow_schema(
        record_schema.SERVER_REQUESTS
    )
    assert table.to_pylist()[1] == {
        "run_id": "r000", "instance": "127.0.0.1:7401", "client_id": 7, "request_id": 1,
        "operation": "send", "status": "OK", "receive_ns": 9_501, "queued_ns": 1,
        "pool_wait_ns": 2, "db_round_trip_ns": 3, "db_exec_ns": 4, "deserialize_ns": 5,
        "serialize_ns": 6, "total_ns": 7,
    }  # fmt: skip


def test_rows_of_every_buffer_of_a_kind_reach_its_file(tmp_path: Path) -> None:
    writer = parquet.RecordWriter(tmp_path, "clients-0", [record_schema.CLIENT_REQUESTS])
    for behaviour in ("standard", "reader"):
        rows = writer.add_buffer(record_schema.CLIENT_REQUESTS, ("r000", "clients-0", behaviour), 5)
        rows.append(("127.0.0.1:7401", 3, 1, "pop", "OK", 1_005, 9, 1, 1, 20, 30, (4,), (1,)))
    writer.append(record_schema.CLIENT_REQUESTS, ("r000", "clients-0", "setup", *SETUP_CALL))
    rows = read_rows(writer.close())
    assert sorted((row["behaviour"], row["start_ns"]) for row in rows) == [
        ("reader", 1_000), ("setup", 2_000), ("standard", 1_000),
    ]  # fmt: skip
    assert sorted(row["message_ids"] for row in rows) == [[], [4], [4]]


def test_close_writes_everything_to_kind_dir_process_n(tmp_path: Path) -> None:
    writer = parquet.RecordWriter(tmp_path, "127.0.0.1:7401", [GC_KIND]).start()
    for n in range(5):
        writer.append(GC_KIND, gc_row(n))
    paths = writer.close()
    assert paths == [tmp_path / GC_KIND / "127.0.0.1_7401-0.parquet"]
    assert [row["ts_ns"] for row in read_rows(paths)] == [1_000 + n for n in range(5)]


def test_periodic_flushes_become_row_groups_of_one_file(tmp_path: Path) -> None:
    writer = parquet.RecordWriter(tmp_path, "p", [GC_KIND], flush_interval=0.05).start()
    for n in range(3):
        writer.append(GC_KIND, gc_row(n))
        wait_flushed(writer)  # each row is taken by its own flush
    paths = writer.close()
    assert len(paths) == 1
    assert pq.ParquetFile(paths[0]).metadata.num_row_groups == 3
    assert len(read_rows(paths)) == 3


def test_a_file_being_written_is_hidden_until_it_is_finished(tmp_path: Path) -> None:
    writer = parquet.RecordWriter(tmp_path, "p", [GC_KIND], flush_interval=0.05).start()
    writer.append(GC_KIND, gc_row(1))
    deadline = time.monotonic() + 10
    while not (tmp_path / GC_KIND).is_dir() or not any((tmp_path / GC_KIND).iterdir()):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    names = [path.name for path in (tmp_path / GC_KIND).iterdir()]
    assert names == [".p-0.parquet.partial"]
    writer.close()
    assert [path.name for path in (tmp_path / GC_KIND).iterdir()] == ["p-0.parquet"]


def test_files_roll_over_so_a_crash_loses_only_the_open_one(tmp_path: Path) -> None:
    writer = parquet.RecordWriter(tmp_path, "p", [GC_KIND], flush_interval=0.05)
    writer.roll_interval = 0.1
    writer.start()
    for n in range(4):
        writer.append(GC_KIND, gc_row(n))
        wait_flushed(writer)
        time.sleep(0.2)  # older than the roll interval: the next flush finishes the file
    paths = writer.close()
    assert len(paths) >= 2
    assert [p.name for p in paths[:2]] == ["p-0.parquet", "p-1.parquet"]
    assert sorted(row["ts_ns"] for row in read_rows(paths)) == [1_000 + n for n in range(4)]


def test_a_second_writer_with_the_same_name_takes_the_next_number(tmp_path: Path) -> None:
    first = parquet.RecordWriter(tmp_path, "p", [GC_KIND]).start()
    second = parquet.RecordWriter(tmp_path, "p", [GC_KIND]).start()
    first.append(GC_KIND, gc_row(1))
    second.append(GC_KIND, gc_row(2))
    names = {path.name for path in first.close() + second.close()}
    assert names == {"p-0.parquet", "p-1.parquet"}


def test_a_declared_kind_without_rows_still_gets_an_empty_file(tmp_path: Path) -> None:
    kinds = [GC_KIND, record_schema.RESOURCES]
    writer = parquet.RecordWriter(tmp_path, "p", kinds).start()
    paths = writer.close()
    assert {path.parent.name for path in paths} == set(kinds)
    for path in paths:
        assert pq.read_table(path).num_rows == 0
        assert pq.read_schema(path) == record_schema.arrow_schema(path.parent.name)


def test_rows_appended_from_many_threads_during_flushes_are_all_written_once(
    tmp_path: Path,
) -> None:
    writer = parquet.RecordWriter(tmp_path, "p", [GC_KIND], flush_interval=0.01).start()

    def append_many(base: int) -> None:
        for n in range(2_000):
            writer.append(GC_KIND, gc_row(base + n))

    threads = [threading.Thread(target=append_many, args=(k * 10_000,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    rows = read_rows(writer.close())
    expected = sorted(1_000 + k * 10_000 + n for k in range(4) for n in range(2_000))
    assert sorted(row["ts_ns"] for row in rows) == expected
    # Columns never drift apart: every row's duration matches its own timestamp.
    assert all(row["duration_ns"] == 10 * (row["ts_ns"] - 1_000) for row in rows)


def test_whole_columns_are_written_at_once_as_one_row_group_each(tmp_path: Path) -> None:
    writer = parquet.RecordWriter(tmp_path, "monitor", [record_schema.QUEUE_DEPTHS])
    for first in (0, 3):
        queues = np.arange(first, first + 3, dtype=np.int64)
        writer.write_columns(
            record_schema.QUEUE_DEPTHS,
            {"run_id": ["r000"] * 3, "ts_ns": queues * 10, "queue_id": queues, "messages": queues},
        )
    (path,) = writer.close()
    assert path == tmp_path / record_schema.QUEUE_DEPTHS / "monitor-0.parquet"
    assert pq.ParquetFile(path).metadata.num_row_groups == 2
    assert pq.read_schema(path) == record_schema.arrow_schema(record_schema.QUEUE_DEPTHS)
    assert [row["queue_id"] for row in read_rows([path])] == list(range(6))


def test_columns_missing_a_field_are_refused(tmp_path: Path) -> None:
    writer = parquet.RecordWriter(tmp_path, "monitor", [record_schema.QUEUE_DEPTHS])
    with pytest.raises(KeyError, match="messages"):
        writer.write_columns(
            record_schema.QUEUE_DEPTHS, {"run_id": ["r000"], "ts_ns": [1], "queue_id": [1]}
        )


def test_whole_numbers_are_delta_encoded_text_has_dictionaries_and_nothing_is_compressed(
    tmp_path: Path,
) -> None:
    writer = parquet.RecordWriter(tmp_path, "clients-0", [record_schema.CLIENT_REQUESTS])
    call = ("127.0.0.1:7401", 3, 1, "pop", "OK", 1_005, 9, 1, 1, 20, 30, (4, 5), (1, 1))
    writer.append(record_schema.CLIENT_REQUESTS, ("r000", "clients-0", "reader", *call))
    (path,) = writer.close()
    group = pq.read_metadata(path).row_group(0)
    chunks = {group.column(n).path_in_schema: group.column(n) for n in range(group.num_columns)}
    assert {chunk.compression for chunk in chunks.values()} == {"UNCOMPRESSED"}
    for name in ("client_id", "start_ns", "message_ids.list.element", "queue_ids.list.element"):
        assert "DELTA_BINARY_PACKED" in chunks[name].encodings, name
    for name in ("run_id", "operation", "status"):
        assert "RLE_DICTIONARY" in chunks[name].encodings, name
    assert read_rows([path])[0]["message_ids"] == [4, 5]
