"""Real `courier serve` processes on free loopback ports, and their addresses.

The shared fixtures of tests/conftest.py (``servers``) and the directories'
``start_server`` fixtures are built from ``starting_servers``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

COURIER = Path(sys.executable).with_name("courier")
READY_LINE = "Courier middleware listening on"
START_TIMEOUT = 20.0

StartServer = Callable[..., Awaitable["ServerProcess"]]
"""``await start_server(dsn=..., **serve_flags)``: one more running server."""


def free_port() -> int:
    """A loopback port nothing listens on (just bound and released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def closed_port_address() -> str:
    """host:port where nothing listens."""
    return f"127.0.0.1:{free_port()}"


def environment_without_settings() -> dict[str, str]:
    """This process's environment minus COURIER_* variables, for a `courier` subprocess
    that must take its settings from its flags alone."""
    return {k: v for k, v in os.environ.items() if not k.startswith("COURIER_")}


def address(server: ServerProcess) -> str:
    host, port = server.address
    return f"{host}:{port}"


def addresses(servers: list[ServerProcess]) -> str:
    """The comma-separated list a client's ``servers`` option takes."""
    return ",".join(address(server) for server in servers)


class ServerProcess:
    """One `courier serve` subprocess; its log goes to a file for the test to read."""

    def __init__(self, dsn: str, log_dir: Path, **options: object) -> None:
        self.port = free_port()
        self.log_path = log_dir / f"serve-{self.port}.log"
        args = [str(COURIER), "serve", "--dsn", dsn, "--port", str(self.port)]
        options.setdefault("heartbeat_interval", 0.2)
        options.setdefault("instance_ttl", 2.0)
        for name, value in options.items():
            flag = "--" + name.replace("_", "-")
            args += [flag] if value is True else [flag, str(value)]
        self.args = args
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    async def start(self) -> ServerProcess:
        with self.log_path.open("wb") as log:
            # Popen returns once the child is forked; it does not wait for it.
            self.process = subprocess.Popen(  # noqa: ASYNC220
                self.args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=environment_without_settings(),
            )
        deadline = time.monotonic() + START_TIMEOUT
        while READY_LINE not in self.log:
            if self.process.poll() is not None:
                raise RuntimeError(f"courier serve exited {self.process.returncode}:\n{self.log}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"courier serve did not start:\n{self.log}")
            await asyncio.sleep(0.02)
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def signal(self, signum: int) -> None:
        assert self.process is not None
        self.process.send_signal(signum)

    async def wait(self, timeout: float = 15.0) -> int:
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while self.process.poll() is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"courier serve still running:\n{self.log}")
            await asyncio.sleep(0.02)
        return self.process.returncode

    async def stop(self) -> None:
        """SIGTERM, then SIGKILL if it does not exit in time."""
        if self.process is None or self.process.poll() is not None:
            return
        self.signal(signal.SIGTERM)
        try:
            await self.wait(10.0)
        except TimeoutError:
            self.process.kill()
            self.process.wait()


@contextlib.asynccontextmanager
async def starting_servers(default_dsn: str, log_dir: Path) -> AsyncIterator[StartServer]:
    """A ``StartServer`` whose servers run on ``default_dsn`` unless given ``dsn=``;
    every server it started is stopped when the block ends."""
    started: list[ServerProcess] = []

    async def start(dsn: str = default_dsn, **options: object) -> ServerProcess:
        server = ServerProcess(dsn, log_dir, **options)
        started.append(server)
        return await server.start()

    try:
        yield start
    finally:
        for server in started:
            await server.stop()


@contextlib.asynccontextmanager
async def running_servers(
    dsn: str, log_dir: Path, count: int = 2
) -> AsyncIterator[list[ServerProcess]]:
    """``count`` servers on one database for the block."""
    async with starting_servers(dsn, log_dir) as start:
        yield [await start() for _ in range(count)]
