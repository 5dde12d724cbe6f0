"""`courier up`: database plus two middleware, pinged, then stopped with Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.parse
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

import courier
from courier import config
from courier.db import embedded, nodes
from helpers.consoles import ConsoleProcess
from helpers.servers import COURIER, environment_without_settings, free_port


def two_free_ports() -> int:
    """A port p such that p and p + 1 are both free on the loopback address."""
    for _ in range(50):
        port = free_port()
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise RuntimeError("no two consecutive free ports")


def is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_for_file(path: Path, process: subprocess.Popen[bytes], log: Path) -> Any:
    deadline = time.monotonic() + 120
    while not path.exists():
        assert process.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)
    return json.loads(path.read_text())


def courier_command(*args: str, env: dict[str, str]) -> str:
    """Run a client command as another shell would; its stdout."""
    done = subprocess.run(
        [str(COURIER), *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def console_queues(env: dict[str, str], log: Path) -> str:
    """Start `courier console` in the environment, return what /api/queues lists."""
    console = ConsoleProcess([], env, log)
    try:
        console.wait_ready()
        return httpx.get(console.url + "/api/queues", timeout=10).text
    finally:
        console.stop()


def test_up_starts_and_stops_a_whole_system(tmp_path: Path) -> None:
    data_dir = tmp_path / "courier"
    port = two_free_ports()
    a, b = f"127.0.0.1:{port}", f"127.0.0.1:{port + 1}"
    log = tmp_path / "up.log"
    # As a new user would: the data dir from COURIER_DATA_DIR alone, in every shell.
    env = environment_without_settings()
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    env["COURIER_DATA_DIR"] = str(data_dir)
    command = [str(COURIER), "up", "--middlewares", "2", "--port", str(port)]
    with log.open("wb") as output:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=output, stderr=output, env=env
        )
    try:
        state = wait_for_file(data_dir / "up.json", process, log)
        assert state["servers"] == [a, b]
        database = embedded.EmbeddedPostgres(data_dir / "pg")
        assert database.status().state is embedded.State.RUNNING
        with courier.Client.connect(a) as first:
            first.ping()
            first.register("visitor")
            first.login(name="visitor")
            # Both middleware share one database: the session is visible from the other.
            with courier.Client.connect(b) as second:
                second.ping()
                with pytest.raises(courier.errors.ClientOnline):
                    second.login(name="visitor")
        assert f"--servers {a},{b}" in log.read_text()
        # The console's admin token is shown once, and it is the one recorded.
        assert log.read_text().count(state["admin_token"]) == 1
        # The database's password is in up.json (mode 0600) for the console, but
        # neither on the terminal nor on any middleware's command line.
        password = urllib.parse.urlsplit(state["dsn"]).password
        assert password == database.secret_path.read_text().strip()
        assert (data_dir / "up.json").stat().st_mode & 0o777 == 0o600
        assert "database postgresql://postgres:***@" in log.read_text()
        assert password not in log.read_text()
        for pid in state["pids"]:
            assert password not in " ".join(psutil.Process(pid).cmdline())

        # The admin client's secret is in the credentials file (0600), not on the terminal.
        kept = data_dir / "credentials.json"
        assert kept.stat().st_mode & 0o777 == 0o600
        admin_secret = json.loads(kept.read_text())["clients"]["admin"]
        assert admin_secret not in log.read_text()
        assert f"its secret is in {kept}" in log.read_text()
        assert "log in with --as admin" in log.read_text()
        courier_command("admin", "create", "ops", "--as", "admin", env=env)

        # Other shells with the same COURIER_DATA_DIR and no other setting find it.
        courier_command("register", "alice", env=env)
        courier_command("queue", "create", "found-by-data-dir", "--as", "alice", env=env)
        courier_command("send", "found-by-data-dir", "hello", "--as", "alice", env=env)
        listed = console_queues(env, tmp_path / "console.log")
        assert "found-by-data-dir" in listed

        process.send_signal(signal.SIGINT)
        assert process.wait(60) == 0, log.read_text()
        assert not (data_dir / "up.json").exists()
        assert not any(is_alive(pid) for pid in state["pids"])
        assert database.status().state is not embedded.State.RUNNING
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        embedded.EmbeddedPostgres(data_dir / "pg").stop()


def test_up_with_tls_makes_a_ca_and_client_commands_use_it(tmp_path: Path) -> None:
    data_dir = tmp_path / "courier"
    port = free_port()
    log = tmp_path / "up.log"
    env = environment_without_settings()
    env["COURIER_DATA_DIR"] = str(data_dir)
    command = [str(COURIER), "up", "--tls", "--port", str(port)]
    with log.open("wb") as output:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=output, stderr=output, env=env
        )
    try:
        state = wait_for_file(data_dir / "up.json", process, log)
        ca = Path(state["ca"])
        assert ca.parent == data_dir / "tls" and ca.is_file()
        assert (data_dir / "tls").stat().st_mode & 0o777 == 0o700
        assert (data_dir / "tls" / "server.key").stat().st_mode & 0o777 == 0o600
        # Client commands in another shell find the servers and trust the CA by themselves.
        courier_command("register", "tls-user", env=env)
        courier_command("queue", "create", "secured", "--as", "tls-user", env=env)
        courier_command("send", "secured", "sealed", "--as", "tls-user", env=env)
        assert "sealed" in courier_command("pop", "secured", "--as", "tls-user", env=env)
        with pytest.raises(courier.errors.TlsError):
            courier.Client.connect(f"127.0.0.1:{port}")  # plaintext is refused
        with courier.Client.connect(f"127.0.0.1:{port}", ca=ca) as client:
            assert client.ping() > 0
        process.send_signal(signal.SIGINT)
        assert process.wait(60) == 0, log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        embedded.EmbeddedPostgres(data_dir / "pg").stop()


def start_up(*args: str, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as output:
        return subprocess.Popen(
            [str(COURIER), "up", *args], stdin=subprocess.DEVNULL, stdout=output, stderr=output,
            env=env,
        )  # fmt: skip


def stop_up(process: subprocess.Popen[bytes], log: Path) -> None:
    process.send_signal(signal.SIGINT)
    assert process.wait(60) == 0, log.read_text()


def test_up_with_two_nodes_spreads_queues_and_finds_its_nodes_again(tmp_path: Path) -> None:
    data_dir = tmp_path / "courier"
    port = two_free_ports()  # one middleware on each
    log = tmp_path / "up.log"
    env = environment_without_settings()
    env["COURIER_DATA_DIR"] = str(data_dir)
    env["COLUMNS"] = "300"  # `courier node list` prints whole DSNs
    databases = [embedded.EmbeddedPostgres(data_dir / name) for name in ("pg", "pg-node2")]
    process = start_up("--nodes", "2", "--port", str(port), env=env, log=log)
    try:
        wait_for_file(data_dir / "up.json", process, log)
        assert all(db.status().state is embedded.State.RUNNING for db in databases)
        listed = courier_command("node", "list", env=env)
        second_dsn = config.redact_dsn(databases[1].dsn)
        assert f"port={databases[1].port}" in second_dsn and second_dsn in listed
        # up.json is written just before the announcement, a client command after it.
        assert f"node 2 database {second_dsn}" in log.read_text()
        with courier.Client.connect(f"127.0.0.1:{port}") as client:
            client.register("placer")
            client.login(name="placer")
            first, second = client.create_queue("first"), client.create_queue("second")
        assert (nodes.node_of(first.id), nodes.node_of(second.id)) == (1, 2)
        stop_up(process, log)
        assert all(db.status().state is not embedded.State.RUNNING for db in databases)

        # Again on the same data dir: the second database is node 2 still, not a new node.
        # Fresh ports: the last ones may have gone to a new connection's end meanwhile.
        port = two_free_ports()
        process = start_up("--nodes", "2", "--port", str(port), env=env, log=log)
        wait_for_file(data_dir / "up.json", process, log)
        rows = [line for line in courier_command("node", "list", env=env).splitlines()
                if "active" in line]  # fmt: skip
        assert len(rows) == 2
        with courier.Client.connect(f"127.0.0.1:{port}") as client:
            client.login(name="placer")
            assert client.get_queue("second").id == second.id
        stop_up(process, log)
        assert all(db.status().state is not embedded.State.RUNNING for db in databases)
    finally:
        if process.poll() is None:  # a failed assertion: let `courier up` stop its children
            process.send_signal(signal.SIGINT)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for database in reversed(databases):
            database.stop()
