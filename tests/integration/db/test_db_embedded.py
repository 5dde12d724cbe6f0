"""The embedded server's Python API (`courier up`, the lab runner and the tests use it)."""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from courier.db import embedded


@pytest.fixture
def home() -> Iterator[Path]:
    # Outside pytest's basetemp, which any pytest run may reset to mode 0700.
    path = Path(tempfile.mkdtemp(prefix="courier-embedded-test-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def fake_cluster(data_dir: Path, postmaster_pid: int | None) -> embedded.EmbeddedPostgres:
    """Just the files status() reads, without running initdb."""
    data_dir.mkdir()
    (data_dir / "PG_VERSION").write_text("18\n")
    (data_dir / embedded.CONF_FILE).write_text("port = 45678\n")
    if postmaster_pid is not None:
        (data_dir / "postmaster.pid").write_text(f"{postmaster_pid}\n{data_dir}\n")
    return embedded.EmbeddedPostgres(data_dir)


def test_status_reads_the_data_dir(home: Path) -> None:
    assert embedded.EmbeddedPostgres(home / "none").status() == embedded.ServerStatus(
        embedded.State.NOT_INITIALISED
    )
    stopped = fake_cluster(home / "stopped", None)
    assert stopped.status() == embedded.ServerStatus(embedded.State.STOPPED, port=45678)
    assert stopped.dsn == "postgresql://postgres@127.0.0.1:45678/courier"


def test_a_pid_file_naming_another_process_means_crashed(home: Path) -> None:
    # Our own pid is alive but is no postgres: a reused pid must not look like a server.
    reused = fake_cluster(home / "reused", os.getpid())
    assert reused.status().state is embedded.State.CRASHED
    reused.stop()  # nothing to stop: no error, and our process is untouched


def test_concurrent_starts_share_one_server(home: Path) -> None:
    data_dir = home / "pg"
    servers = [embedded.EmbeddedPostgres(data_dir, durable=False) for _ in range(3)]
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
            dsns = list(pool.map(lambda server: server.start(), servers))
        assert len(set(dsns)) == 1
        status = servers[0].status()
        assert status.state is embedded.State.RUNNING
        assert status.pid is not None and status.port is not None
        assert str(status.port) in dsns[0]
    finally:
        servers[0].stop()
    assert servers[1].status().state is embedded.State.STOPPED
