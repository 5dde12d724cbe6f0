"""The processes the runner starts, and only those: middleware subprocesses.

Each runs in its own session (so Ctrl-C reaches the runner alone, which then stops
everything in order) and is stopped by its pid: SIGTERM, then SIGKILL if it has
not exited within the grace period. Its output goes to ``<run>/logs/``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

COURIER = [
    sys.executable,
    "-c",
    "import sys; sys.argv[0] = 'courier'; import courier.cli.main as m; m.main()",
]
"""The `courier` command, run by this very interpreter (whatever its scripts dir)."""
READY_LINE = "Courier middleware listening on"
START_TIMEOUT = 30.0
STOP_GRACE = 15.0


class ProcessFailed(RuntimeError):
    """A process the runner started did not come up or did not end cleanly."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


def serve_supports_recording() -> bool:
    """Whether `courier serve` has --record-dir yet (else the lab's launcher is used)."""
    try:
        from courier.cli import serve
    except ImportError:
        return False
    return any(param.name == "record_dir" for param in serve.serve.params)


@dataclass(frozen=True, slots=True)
class MiddlewareOptions:
    dsn: str
    port: int
    record_dir: Path | None  # None: no recording (the overhead benchmark)
    run_id: str
    host: str = "127.0.0.1"
    pool_size: int = 8
    max_clients: int = 256
    mock: bool = False
    frame_timeout: float | None = None  # None: the server's default

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        if serve_supports_recording():
            program = [*COURIER, "serve"]
        else:
            program = [sys.executable, "-m", "courier.lab.middleware"]
        flags = ["--host", self.host, "--port", str(self.port)]
        flags += ["--pool-size", str(self.pool_size), "--max-clients", str(self.max_clients)]
        if self.record_dir is not None:
            flags += ["--record-dir", str(self.record_dir), "--run-id", self.run_id]
        if self.frame_timeout is not None:
            flags += ["--frame-timeout", str(self.frame_timeout)]
        flags += ["--mock"] if self.mock else ["--dsn", self.dsn]
        return [*program, *flags]


class MiddlewareProcess:
    def __init__(self, options: MiddlewareOptions, log_dir: Path) -> None:
        self.options = options
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"middleware-{options.port}.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def launch(self) -> None:
        # Settings come from the flags alone, not from the runner's environment.
        env = {key: value for key, value in os.environ.items() if not key.startswith("COURIER_")}
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                self.options.command(), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                env=env, start_new_session=True,
            )  # fmt: skip

    async def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while READY_LINE not in self.log_text():
            if self.process.poll() is not None:
                raise ProcessFailed(
                    f"middleware {self.options.address} exited with {self.process.returncode}:\n"
                    + self.log_text()[-3000:]
                )
            if time.monotonic() > deadline:
                raise ProcessFailed(f"middleware {self.options.address} did not start in time")
            await asyncio.sleep(0.05)

    async def stop(self, grace: float = STOP_GRACE) -> int | None:
        """SIGTERM, then SIGKILL after ``grace`` seconds; returns the exit code."""
        process = self.process
        if process is None or process.poll() is not None:
            return None if process is None else process.returncode
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.to_thread(process.wait, grace)
        except subprocess.TimeoutExpired:
            process.kill()
            await asyncio.to_thread(process.wait)
        return process.returncode
