"""Real `courier serve` processes on free loopback ports, and their addresses.

They are started by Courier's own launcher (``courier.server.launcher``), the one
`courier up` and the lab use.

The shared fixtures of tests/conftest.py (``servers``) and the directories'
``start_server`` fixtures are built from ``starting_servers``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from courier.server import launcher
from courier.server.launcher import free_port

COURIER = Path(sys.executable).with_name("courier")
"""The installed `courier` command, for tests that run it as a user would."""
START_TIMEOUT = 20.0

StartServer = Callable[..., Awaitable["ServerProcess"]]
"""``await start_server(dsn=..., **serve_flags)``: one more running server."""


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
    """One `courier serve` on a free port, started by Courier's own launcher; its log
    goes to a file for the test to read."""

    def __init__(self, dsn: str, log_dir: Path, **options: object) -> None:
        self.port = free_port()
        options.setdefault("heartbeat_interval", 0.2)
        options.setdefault("instance_ttl", 2.0)
        self._log_dir = log_dir
        self._options = {"dsn": dsn, **options}
        self.middleware: launcher.Middleware | None = None

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        return None if self.middleware is None else self.middleware.process

    @property
    def log(self) -> str:
        return "" if self.middleware is None else self.middleware.log_text()

    async def start(self) -> ServerProcess:
        self.middleware = launcher.Middleware.start(self._log_dir, port=self.port, **self._options)
        await self.middleware.ready(START_TIMEOUT)
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
        if self.middleware is not None:
            await self.middleware.stopped(grace=10.0)


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
