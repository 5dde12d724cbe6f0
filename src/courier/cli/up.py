"""`courier up`: a whole local system in one command, stopped with Ctrl-C.

Starts the embedded database (initialising and migrating it on first use), then
N `courier serve` processes on consecutive ports, waits until each answers a PING,
and records the system in ``<data dir>/up.json`` so that client commands and the
console find it without flags. On Ctrl-C or SIGTERM it stops the middleware, then
the database (unless it was already running before), and removes the state file.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from courier import config, errors, protocol
from courier.db import embedded

STATE_FILE = "up.json"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 15.0
STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}


@dataclass
class Middleware:
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


@click.command()
@click.option("--middlewares", default=1, show_default=True, help="Middleware processes to run.")
@click.option("--port", default=config.DEFAULT_PORT, show_default=True, help="Port of the first.")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where the database, logs and up.json live (default: ~/.local/share/courier).",
)
def up(middlewares: int, port: int, data_dir: Path | None) -> None:
    """Start the database and N middleware servers; Ctrl-C stops them all."""
    if middlewares < 1:
        raise click.BadParameter("at least one", param_hint="--middlewares")
    data_dir = (data_dir or config.default_data_dir()).expanduser().absolute()
    state_path = data_dir / STATE_FILE
    refuse_if_already_up(state_path)
    database = embedded.EmbeddedPostgres(data_dir / "pg")
    database_was_running = database.status().state is embedded.State.RUNNING
    servers: list[Middleware] = []
    try:
        click.echo("starting the database ...", err=True)
        dsn = start_database(database)
        servers = start_middlewares(dsn, port, middlewares, data_dir / "logs")
        admin_token = secrets.token_urlsafe(24)
        write_state(state_path, dsn, servers, admin_token)
        announce(dsn, servers, database_was_running, admin_token)
        wait_for_stop(servers)
    finally:
        # A second Ctrl-C must not cut the clean-up short.
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)
        click.echo("stopping ...", err=True)
        stop_middlewares(servers)
        if not database_was_running:
            database.stop()
        state_path.unlink(missing_ok=True)
    click.echo("stopped", err=True)


def start_database(database: embedded.EmbeddedPostgres) -> str:
    """Start (initialising and migrating on first use); returns the DSN."""
    try:
        return database.start()
    except embedded.EmbeddedError as exc:
        raise click.ClickException(str(exc)) from exc


def refuse_if_already_up(state_path: Path) -> None:
    try:
        state = json.loads(state_path.read_text())
        pids = [int(pid) for pid in state.get("pids", [])]
    except (OSError, ValueError, TypeError, AttributeError):
        return
    if any(is_alive(pid) for pid in pids):
        raise click.ClickException(f"a system is already up (see {state_path})")


def is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def start_middlewares(dsn: str, first_port: int, count: int, log_dir: Path) -> list[Middleware]:
    log_dir.mkdir(parents=True, exist_ok=True)
    servers = [spawn_serve(dsn, first_port + n, log_dir) for n in range(count)]
    try:
        deadline = time.monotonic() + START_TIMEOUT
        for server in servers:
            wait_until_answering(server, deadline)
    except BaseException:
        stop_middlewares(servers)
        raise
    return servers


def spawn_serve(dsn: str, port: int, log_dir: Path) -> Middleware:
    log_path = log_dir / f"serve-{port}.log"
    command = [sys.executable, "-m", "courier.cli.serve", "--dsn", dsn, "--port", str(port)]
    with log_path.open("ab") as log:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    return Middleware(port, process, log_path)


def wait_until_answering(server: Middleware, deadline: float) -> None:
    while not answers_ping("127.0.0.1", server.port):
        if server.process.poll() is not None:
            tail = server.log_path.read_text(errors="replace")[-2000:]
            raise click.ClickException(f"the middleware on port {server.port} exited:\n{tail}")
        if time.monotonic() > deadline:
            raise click.ClickException(f"the middleware on port {server.port} did not start")
        time.sleep(0.1)


def answers_ping(host: str, port: int, timeout: float = 1.0) -> bool:
    """Whether a Courier middleware answers a PING at this address."""
    decoder = protocol.Decoder()
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(protocol.encode(1, protocol.Ping()))
            while data := sock.recv(4096):
                if frames := decoder.feed(data):
                    return isinstance(protocol.parse(frames[0]), protocol.Pong)
    except (OSError, errors.CourierError):
        pass
    return False


def write_state(path: Path, dsn: str, servers: list[Middleware], admin_token: str) -> None:
    state: dict[str, Any] = {
        "servers": [server.address for server in servers],
        "pids": [server.process.pid for server in servers],
        "dsn": dsn,
        "admin_token": admin_token,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    # The console's admin token is in it: readable by this user only.
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        json.dump(state, handle, indent=2)


def announce(
    dsn: str, servers: list[Middleware], database_was_running: bool, admin_token: str
) -> None:
    addresses = ",".join(server.address for server in servers)
    click.echo(f"database {dsn}")
    for server in servers:
        click.echo(f"middleware {server.address}  (log: {server.log_path})")
    if database_was_running:
        click.echo("(the database was already running; it stays up afterwards)")
    click.echo(f"connect with: --servers {addresses}  (client commands default to these)")
    click.echo(f"console admin token (shown once; `courier console` uses it): {admin_token}")
    click.echo("Ctrl-C stops everything.")


def wait_for_stop(servers: list[Middleware]) -> None:
    """Block until SIGINT/SIGTERM, or until a middleware exits on its own."""
    watched = {*STOP_SIGNALS, signal.SIGCHLD}
    signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    try:
        while True:
            for server in servers:
                if server.process.poll() is not None:
                    raise click.ClickException(
                        f"the middleware on port {server.port} exited "
                        f"({server.process.returncode}); see {server.log_path}"
                    )
            if signal.sigwait(watched) in STOP_SIGNALS:
                return
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, watched)


def stop_middlewares(servers: list[Middleware]) -> None:
    """SIGTERM each (they finish their requests and unregister), then wait."""
    for server in servers:
        if server.process.poll() is None:
            server.process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    for server in servers:
        try:
            server.process.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            server.process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.process.wait(5)
