"""The system `courier bench chaos` abuses: an embedded PostgreSQL and N middleware.

Every process here is the benchmark's own and is signalled by its pid: a kill is
SIGKILL to one middleware, which is then started again on the same port; a
database restart is PostgreSQL's fast shutdown (SIGINT to the postmaster), then a
start on the same data dir and port. Each event keeps its instants on
``time.monotonic()``, the clock the client processes use too.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from courier.db import embedded
from courier.server import launcher


@dataclass(frozen=True, slots=True)
class Kill:
    """One middleware killed at ``at`` and serving again ``restarted_s`` later."""

    server: str
    pid: int
    at: float
    restarted_s: float


@dataclass(frozen=True, slots=True)
class DatabaseRestart:
    at: float
    stopped_s: float  # the fast shutdown
    back_s: float  # from ``at`` until it accepted connections again


class Cluster:
    """The middleware processes on one database; ``async with`` starts and stops them."""

    def __init__(
        self, server: embedded.EmbeddedPostgres, log_dir: Path, count: int, pool_size: int
    ) -> None:
        self.database = server
        self._log_dir = log_dir
        self._pool_size = pool_size
        self._ports = [launcher.free_port() for _ in range(count)]  # a restart keeps its port
        self._running: list[launcher.Middleware | None] = [None] * count
        self._starts = 0
        self._random = random.Random()

    @property
    def servers(self) -> tuple[str, ...]:
        return tuple(f"{launcher.HOST}:{port}" for port in self._ports)

    async def __aenter__(self) -> Cluster:
        try:
            await asyncio.gather(*(self._start(index) for index in range(len(self._ports))))
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def stop(self) -> None:
        """Stop (SIGTERM, then SIGKILL) every middleware still running."""
        running = [process for process in self._running if process is not None]
        await asyncio.gather(*(process.stopped() for process in running))

    async def _start(self, index: int) -> None:
        self._starts += 1
        log_dir = self._log_dir / f"start-{self._starts:03d}"
        process = launcher.Middleware.start(
            log_dir,
            port=self._ports[index],
            dsn=self.database.dsn,
            pool_size=self._pool_size,
            open_login=True,
        )
        self._running[index] = process
        await process.ready()

    async def kill_one(self) -> Kill:
        """SIGKILL a random middleware, then start it again on its port."""
        index = self._random.randrange(len(self._ports))
        process = self._running[index]
        assert process is not None
        pid = process.pid
        at = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        await asyncio.to_thread(process.process.wait)
        self._running[index] = None
        await self._start(index)
        return Kill(process.address, pid, at, time.monotonic() - at)

    async def restart_database(self) -> DatabaseRestart:
        """Fast shutdown, then start again on the same data dir and port."""
        port = self.database.port
        at = time.monotonic()
        await asyncio.to_thread(self.database.stop)
        stopped = time.monotonic()
        await asyncio.to_thread(self.database.start)
        if self.database.port != port:
            raise embedded.EmbeddedError(
                f"PostgreSQL came back on port {self.database.port}, not {port}"
            )
        return DatabaseRestart(at, stopped - at, time.monotonic() - at)

    def logs(self) -> str:
        """Where the middleware logs are, for a person looking into a failure."""
        return str(self._log_dir)
