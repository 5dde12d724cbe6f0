"""The embedded server's Python API (`courier up`, the lab runner and the tests use it)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import shutil
import stat
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import psutil
import pytest

from courier.db import embedded
from helpers import dsns


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
    assert stopped.dsn == "postgresql://postgres@127.0.0.1:45678/courier"  # no secret yet
    stopped.secret_path.write_text("a b/c@d\n")
    assert stopped.dsn == "postgresql://postgres:a%20b%2Fc%40d@127.0.0.1:45678/courier"


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


def without_password(dsn: str) -> str:
    parts = urllib.parse.urlsplit(dsn)
    address = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=f"{parts.username}@{address}").geturl()


def connects(dsn: str, password: str | None = None) -> bool:
    """Whether the server lets this DSN in (with ``password`` instead of the DSN's)."""

    async def attempt() -> bool:
        extra = {} if password is None else {"password": password}
        try:
            connection = await asyncpg.connect(dsn, **extra)
        except asyncpg.InvalidPasswordError:
            return False
        await connection.close()
        return True

    return asyncio.run(attempt())


def execute(dsn: str, statement: str) -> None:
    async def run() -> None:
        connection = await asyncpg.connect(dsn)
        try:
            await connection.execute(statement)
        finally:
            await connection.close()

    asyncio.run(run())


def assert_password_required(server: embedded.EmbeddedPostgres) -> None:
    dsn = server.dsn
    secret = server.secret_path.read_text().strip()
    assert len(secret) >= 32 and f":{secret}@" in dsn
    assert stat.S_IMODE(server.secret_path.stat().st_mode) == 0o600
    # Both ways in, the Unix socket the DSNs name and TCP, want the password.
    for way in (dsn, dsns.over_tcp(dsn)):
        assert connects(way)
        assert not connects(without_password(way), password="")
        assert not connects(way, password="wrong")
    for admin in (server.admin_dsn, dsns.over_tcp(server.admin_dsn)):
        assert not connects(without_password(admin), password="")
    # The only network address it listens on is the loopback one.
    postmaster = psutil.Process(server.status().pid)
    listening = [c.laddr for c in postmaster.net_connections(kind="inet")]
    assert listening and {address.ip for address in listening} == {"127.0.0.1"}


def test_a_new_cluster_requires_its_password(home: Path) -> None:
    server = embedded.EmbeddedPostgres(home / "pg", durable=False)
    try:
        server.start()
        assert_password_required(server)
    finally:
        server.stop()


def server_address(dsn: str) -> str | None:
    """The address the server sees the connection on: None for its Unix socket."""

    async def ask() -> str | None:
        connection = await asyncpg.connect(dsn)
        try:
            address = await connection.fetchval("SELECT inet_server_addr()::text")
            return None if address is None else str(address)
        finally:
            await connection.close()

    return asyncio.run(ask())


def test_the_dsns_name_the_unix_socket_while_the_server_runs(home: Path) -> None:
    server = embedded.EmbeddedPostgres(home / "pg", durable=False)
    try:
        dsn = server.start()
        assert server.socket_dir == server.data_dir
        assert dsn == server.dsn and f"host={server.data_dir}&port={server.port}" in dsn
        assert server_address(dsn) is None  # the socket
        assert server_address(dsns.over_tcp(dsn)) == "127.0.0.1/32"
    finally:
        server.stop()
    assert server.dsn == dsns.over_tcp(dsn)  # no socket while it is stopped


def test_a_cluster_made_before_the_socket_gets_it_at_its_next_start(home: Path) -> None:
    server = embedded.EmbeddedPostgres(home / "pg", durable=False)
    server.start()
    server.stop()
    conf = server.data_dir / embedded.CONF_FILE
    made_before = conf.read_text().replace(
        f"unix_socket_directories = '{server.data_dir}'", "unix_socket_directories = ''"
    )
    conf.write_text(made_before)
    assert server.socket_dir is None
    try:
        dsn = server.start()
        assert server.socket_dir == server.data_dir
        assert "host=" in dsn and server_address(dsn) is None
        # The rest of its settings are as they were.
        assert conf.read_text() == made_before.replace(
            "unix_socket_directories = ''", f"unix_socket_directories = '{server.data_dir}'"
        )
    finally:
        server.stop()


def test_a_data_dir_too_deep_for_a_socket_is_reached_over_tcp(home: Path) -> None:
    deep = home / ("d" * 60) / ("e" * 60) / "pg"
    deep.mkdir(parents=True)
    (deep / "PG_VERSION").write_text("18\n")
    server = embedded.EmbeddedPostgres(deep)
    server._write_conf(45678)
    assert server.socket_dir is None
    assert server.dsn == "postgresql://postgres@127.0.0.1:45678/courier"
    assert embedded._socket_fits(home / "pg", 45678)
    assert not embedded._socket_fits(home / "a,b", 45678)  # the setting is a list


def make_trust_era(server: embedded.EmbeddedPostgres) -> None:
    """Turn a new cluster into one an earlier Courier made: trust, no password, no secret."""
    server.start()
    execute(server.dsn, "SELECT * FROM courier_create_queue_v1('kept')")
    hba = server.data_dir / "pg_hba.conf"
    hba.write_text(hba.read_text().replace(embedded.AUTH_METHOD, "trust"))
    execute(server.admin_dsn, "SELECT pg_reload_conf()")
    deadline = time.monotonic() + 10
    while not connects(server.admin_dsn, password=""):  # the reload is asynchronous
        assert time.monotonic() < deadline
        time.sleep(0.05)
    execute(server.admin_dsn, "ALTER ROLE postgres PASSWORD NULL")
    server.secret_path.unlink()


@pytest.mark.parametrize("running", [False, True], ids=["stopped", "running"])
def test_a_trust_era_cluster_requires_a_password_after_its_next_start(
    home: Path, running: bool
) -> None:
    servers = [embedded.EmbeddedPostgres(home / "pg", durable=False) for _ in range(2)]
    try:
        make_trust_era(servers[0])
        if not running:
            servers[0].stop()
        assert servers[0].dsn.startswith("postgresql://postgres@")  # no secret: trust
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            dsns = list(pool.map(lambda server: server.start(), servers))
        assert dsns[0] == dsns[1] == servers[0].dsn
        assert_password_required(servers[0])
        rules = (servers[0].data_dir / "pg_hba.conf").read_text().splitlines()
        methods = {line.split()[-1] for line in rules if line.strip() and line[0] != "#"}
        assert methods == {embedded.AUTH_METHOD}
    finally:
        servers[0].stop()
    servers[0].start()  # and it stays so, data included
    try:
        assert_password_required(servers[0])

        async def queue_names() -> list[str]:
            connection = await asyncpg.connect(servers[0].dsn)
            try:
                return [row[0] for row in await connection.fetch("SELECT name FROM courier_queues")]
            finally:
                await connection.close()

        assert asyncio.run(queue_names()) == ["kept"]
    finally:
        servers[0].stop()
