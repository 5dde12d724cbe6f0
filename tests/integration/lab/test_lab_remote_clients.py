"""`courier lab clients`: a load-generator process run by hand against running middleware."""

from __future__ import annotations

import collections
from pathlib import Path

from lab_helpers import read_kind

from courier.lab import remote
from courier.measurements import record_schema
from courier.server import launcher


async def test_a_hand_run_load_process_records_like_the_runners(dsn: str, tmp_path: Path) -> None:
    record_dir = tmp_path / "r000"
    server = launcher.Middleware.start(
        tmp_path / "logs",
        dsn=dsn,
        record_dir=record_dir,
        run_id="r000",
        pool_size=2,
        open_login=True,
    )
    try:
        await server.ready()
        result = await remote.run_clients(
            remote.ClientsOptions(
                servers=(server.address,),
                record_dir=record_dir,
                run_id="r000",
                process="loadhost-1",
                behaviour="sender",
                count=3,
                duration_s=1.5,
                queues=4,
            )
        )
    finally:
        assert await server.stopped() == 0
    assert result.errors == 0 and result.iterations > 10
    client_rows = read_kind(record_dir, record_schema.CLIENT_REQUESTS)
    server_rows = read_kind(record_dir, record_schema.SERVER_REQUESTS)
    keys = collections.Counter((r["client_id"], r["request_id"]) for r in client_rows)
    assert keys == collections.Counter((r["client_id"], r["request_id"]) for r in server_rows)
    sends = [r for r in client_rows if r["behaviour"] == "sender" and r["operation"] == "send"]
    assert len(sends) == result.iterations
    assert {r["process"] for r in client_rows} == {"loadhost-1", "loadhost-1-setup"}
    assert {r["run_id"] for r in client_rows + server_rows} == {"r000"}
    processes_sampled = {r["process"] for r in read_kind(record_dir, record_schema.RESOURCES)}
    assert processes_sampled == {"loadhost-1", server.address}
