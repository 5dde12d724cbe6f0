"""A process's recording keeps the rows the request hooks hand over as they come."""

from __future__ import annotations

import types
from pathlib import Path

import pyarrow.parquet as pq

from courier.lab import process_recording
from courier.measurements import record_schema

SERVER = "127.0.0.1:7401"


def test_a_client_recorder_writes_every_call_at_once_and_counts_it(tmp_path: Path) -> None:
    kinds = [record_schema.CLIENT_REQUESTS]
    recorded = process_recording.ProcessRecording(
        tmp_path, "r000", "clients-0", "client", kinds, clock_offset_ns=5
    )
    counter = types.SimpleNamespace(requests=0)
    standard = recorded.client_recorder("standard", counter)
    standard((SERVER, 7, 1, "login", "OK", 1_005, 9, 1, 1, 20, 30, (), ()))  # nothing held back
    standard((SERVER, 7, 2, "send", "OK", 2_005, 9, 1, 1, 20, 30, (11,), (3,)))
    recorded.client_recorder("reader")(
        (SERVER, 8, 1, "login", "OK", 3_005, 9, 1, 1, 20, 30, (), ())
    )
    rows = [row for path in recorded.close() for row in pq.read_table(path).to_pylist()]
    assert counter.requests == 2
    assert sorted(
        (row["behaviour"], row["client_id"], row["request_id"], row["operation"], row["start_ns"])
        for row in rows
    ) == [
        ("reader", 8, 1, "login", 3_000),
        ("standard", 7, 1, "login", 1_000),
        ("standard", 7, 2, "send", 2_000),
    ]
    assert {(row["run_id"], row["process"]) for row in rows} == {("r000", "clients-0")}
