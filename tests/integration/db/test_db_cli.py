"""`courier db ...` run as real commands against a temporary data dir."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import asyncpg
import psutil
import pytest

from courier import db

if TYPE_CHECKING:
    from conftest import TestDatabases

pytestmark = pytest.mark.slow

COURIER = str(Path(sys.executable).with_name("courier"))
MIGRATIONS = Path(db.__file__).parent / "sql" / "migrations"
# Through the cluster's Unix socket, in its data dir: secret, socket dir, port.
DSN_PATTERN = re.compile(r"^postgresql://postgres:([\w-]+)@/courier\?host=(/\S+)&port=(\d+)$")


@pytest.fixture
def data_dir() -> Iterator[Path]:
    # Outside pytest's basetemp, which any pytest run may reset to mode 0700.
    home = Path(tempfile.mkdtemp(prefix="courier-cli-test-"))
    try:
        yield home / "courier"  # the data dir; the cluster is its pg/
    finally:
        courier("db", "stop", data_dir=home / "courier")
        shutil.rmtree(home, ignore_errors=True)


def courier(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COURIER_DATA_DIR": str(data_dir)}
    return subprocess.run(
        [COURIER, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def started(data_dir: Path) -> str:
    """Start, and return the DSN `db url` gives; `db start` prints it password masked."""
    result = courier("db", "start", data_dir=data_dir)
    assert result.returncode == 0, result.stderr
    dsn = courier("db", "url", data_dir=data_dir).stdout.strip()
    match = DSN_PATTERN.match(dsn)
    assert match and match.group(2) == str(data_dir / "pg"), dsn
    assert result.stdout.strip() == dsn.replace(match.group(1), "***")
    return dsn


def port_of(dsn: str) -> int:
    return int(DSN_PATTERN.match(dsn).group(3))  # type: ignore[union-attr]


def migration_names() -> list[str]:
    """The migration files shipped in the package, in name order, read from disk."""
    return sorted(path.name for path in MIGRATIONS.glob("*.sql"))


def query(dsn: str, sql: str) -> object:
    async def run() -> object:
        connection = await asyncpg.connect(dsn)
        try:
            return await connection.fetchval(sql)
        finally:
            await connection.close()

    return asyncio.run(run())


def test_lifecycle(data_dir: Path) -> None:
    before = courier("db", "status", data_dir=data_dir)
    assert (before.returncode, before.stdout.startswith("not initialised")) == (3, True)

    dsn = started(data_dir)
    assert port_of(dsn) != 5432
    secret = (data_dir / "pg.secret").read_text().strip()
    assert f":{secret}@" in dsn
    # The server outlives the command that started it, with the schema installed.
    applied = query(dsn, "SELECT array_agg(name ORDER BY name) FROM courier_migrations")
    assert applied == migration_names()
    assert started(data_dir) == dsn  # idempotent
    running = courier("db", "status", data_dir=data_dir)
    assert running.returncode == 0
    assert running.stdout.startswith("running")
    assert dsn.replace(secret, "***") in running.stdout and secret not in running.stdout
    assert courier("db", "url", data_dir=data_dir).stdout.strip() == dsn
    elsewhere = data_dir.with_name("elsewhere")
    via_flag = courier("db", "url", "--data-dir", str(data_dir), data_dir=elsewhere)
    assert via_flag.stdout.strip() == dsn  # the flag beats COURIER_DATA_DIR
    assert courier("db", "url", data_dir=elsewhere).returncode == 1  # nothing there
    query(dsn, "SELECT * FROM courier_create_queue_v1('kept')")

    assert courier("db", "stop", data_dir=data_dir).returncode == 0
    stopped = courier("db", "status", data_dir=data_dir)
    assert (stopped.returncode, stopped.stdout.strip()) == (3, "stopped")
    with pytest.raises(OSError):
        query(dsn, "SELECT 1")
    assert courier("db", "stop", data_dir=data_dir).returncode == 0  # stopping twice is fine

    assert started(data_dir) == dsn  # same port, same data
    assert query(dsn, "SELECT name FROM courier_queues") == "kept"


def test_status_tells_the_truth_after_a_crash(data_dir: Path) -> None:
    dsn = started(data_dir)
    postmaster = psutil.Process(int((data_dir / "pg" / "postmaster.pid").read_text().split()[0]))
    postmaster.send_signal(signal.SIGKILL)
    postmaster.wait(10)

    crashed = courier("db", "status", data_dir=data_dir)
    assert crashed.returncode == 1
    assert crashed.stdout.startswith("stopped")
    assert (data_dir / "pg" / "postmaster.pid").exists()  # stale, yet not believed

    assert started(data_dir) == dsn
    assert courier("db", "status", data_dir=data_dir).returncode == 0


def test_a_taken_port_is_replaced_and_remembered(data_dir: Path) -> None:
    old_port = port_of(started(data_dir))
    courier("db", "stop", data_dir=data_dir)

    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # despite TIME_WAIT
        squatter.bind(("127.0.0.1", old_port))
        squatter.listen()
        new_dsn = started(data_dir)
    new_port = port_of(new_dsn)

    assert new_port != old_port
    assert query(new_dsn, "SELECT 1") == 1
    assert courier("db", "url", data_dir=data_dir).stdout.strip() == new_dsn


def test_migrate_an_external_database(databases: TestDatabases) -> None:
    target = databases.create()
    nowhere = Path("/nonexistent/courier")
    try:
        first = courier("db", "migrate", "--dsn", target, data_dir=nowhere)
        assert first.returncode == 0, first.stderr
        expected = [f"applied {name}" for name in migration_names()] + ["schema is up to date"]
        assert first.stdout.splitlines() == expected
        again = courier("db", "migrate", "--dsn", target, data_dir=nowhere)
        assert again.stdout.splitlines() == ["schema is up to date"]
        assert query(target, "SELECT count(*) FROM courier_queues") == 0
    finally:
        databases.drop(target)


def test_migrate_without_a_target_is_a_usage_error() -> None:
    result = courier("db", "migrate", data_dir=Path("/nonexistent/courier"))
    assert result.returncode == 2
    assert "--dsn" in result.stderr
