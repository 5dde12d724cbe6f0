"""The one way to start a middleware: `courier serve` as a child process.

`courier up`, the lab runner, the benchmarks and the test helpers all start
middleware here. A middleware is ready when it answers a PING, the same test a
client makes. It runs in its own session, so a Ctrl-C at the terminal reaches
only the parent, which then stops its children in order: SIGTERM (they finish
their requests and unregister), then SIGKILL after a grace period.

    server = Middleware.start(log_dir, dsn=dsn, max_clients=512)
    server.wait_ready()
    ...
    server.stop()
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import psutil

from courier import errors, protocol, tls
from courier.protocol import constants

SERVE = [sys.executable, "-m", "courier.cli.serve"]
"""`courier serve`, run by this very interpreter (whatever its scripts dir)."""
HOST = "127.0.0.1"
DSN_VARIABLE = "COURIER_SERVE_DSN"
"""How the DSN reaches the child: its environment, which only its user can read, not
its command line, which every user's `ps` shows (the DSN may carry a password)."""
START_TIMEOUT = 30.0
STOP_GRACE = 15.0


class LaunchFailed(RuntimeError):
    """A middleware did not come up."""


_handed_out: set[int] = set()
LOWEST_PORT = 20_000
"""Where ``free_port`` starts looking: above the ports services commonly keep."""
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def free_port(host: str = HOST) -> int:
    """A port nothing listens on (just bound and released), and never one this process
    handed out before: two middleware started back to back must not get the same.

    It lies below the kernel's ephemeral ports, which every outgoing connection takes
    its own port from: one picked there could be taken by a connection (to the
    database, say) before the middleware binds it. Where the range is unknown, the
    kernel picks."""
    below = _first_ephemeral_port()
    for _ in range(1_000):
        port = _random_port(host, below) if below else _kernel_port(host)
        if port is not None and port not in _handed_out:
            _handed_out.add(port)
            return port
    raise OSError("no free port found below the ephemeral range")


def _first_ephemeral_port() -> int | None:
    try:
        first = int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return first if first > LOWEST_PORT + 1_000 else None


def _random_port(host: str, below: int) -> int | None:
    """A random port in [LOWEST_PORT, below) if it can be bound now, else None."""
    port = random.randrange(LOWEST_PORT, below)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return None
    return port


def _kernel_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
    return port


def serve_flags(options: Mapping[str, object]) -> list[str]:
    """``{"max_clients": 512, "mock": True}`` -> ``--max-clients 512 --mock``;
    None and False leave a flag out (the server's default applies)."""
    flags: list[str] = []
    for name, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + name.replace("_", "-")
        flags += [flag] if value is True else [flag, str(value)]
    return flags


def serve_environment(inherit_settings: bool, dsn: object) -> dict[str, str]:
    """This process's environment, without its COURIER_* settings unless
    ``inherit_settings``, plus the DSN (which beats an inherited one, as a flag would)."""
    environment = dict(os.environ)
    if not inherit_settings:
        environment = {k: v for k, v in environment.items() if not k.startswith("COURIER_")}
    if dsn is not None:
        environment[DSN_VARIABLE] = str(dsn)
    return environment


def answers_ping(
    host: str, port: int, timeout: float = 1.0, context: ssl.SSLContext | None = None
) -> bool:
    """Whether a Courier middleware answers a PING at this address (a probe: a
    recording middleware leaves it out of its records); over TLS with ``context``."""
    decoder = protocol.Decoder()
    try:
        with _connect(host, port, timeout, context) as sock:
            sock.sendall(protocol.encode(constants.PROBE_REQUEST_ID, protocol.Ping()))
            while data := sock.recv(4096):
                if frames := decoder.feed(data):
                    return isinstance(protocol.parse(frames[0]), protocol.Pong)
    except (OSError, errors.CourierError):
        pass
    return False


def _connect(host: str, port: int, timeout: float, context: ssl.SSLContext | None) -> socket.socket:
    plain = socket.create_connection((host, port), timeout=timeout)
    if context is None:
        return plain
    try:
        return context.wrap_socket(plain, server_hostname=host)
    except BaseException:
        plain.close()
        raise


@dataclass
class Middleware:
    """One `courier serve` child process and where its output goes."""

    port: int
    process: subprocess.Popen[bytes]
    log_path: Path
    host: str = HOST
    ca: Path | None = None
    """The CA its TLS certificate chains to (None: it speaks plaintext)."""

    @classmethod
    def start(
        cls,
        log_dir: Path,
        *,
        port: int | None = None,
        inherit_settings: bool = False,
        **options: object,
    ) -> Middleware:
        """Launch one on ``port`` (a free one by default) with ``options`` as its flags
        (all but ``dsn``, which goes in DSN_VARIABLE, and ``ca``, the CA that its
        ``tls_cert`` chains to, which the readiness check trusts).

        Its settings come from those alone unless ``inherit_settings``, which lets
        the COURIER_* environment of the parent reach it too.
        """
        port = port if port is not None else free_port()
        log_dir.mkdir(parents=True, exist_ok=True)
        log_path = log_dir / f"serve-{port}.log"
        dsn = options.pop("dsn", None)
        ca = options.pop("ca", None)
        command = [*SERVE, "--host", HOST, "--port", str(port), *serve_flags(options)]
        environment = serve_environment(inherit_settings, dsn)
        with log_path.open("ab") as log:
            process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=environment,
                start_new_session=True,
            )  # fmt: skip
        return cls(port, process, log_path, ca=Path(str(ca)) if ca is not None else None)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Block until it answers a PING; LaunchFailed if it exits or takes too long.

        The answer must come from this child: a server left on the port by some
        earlier run would answer too, while the child fails to bind it.
        """
        deadline = time.monotonic() + timeout
        context = tls.client_context(self.ca) if self.ca is not None else None
        while not (self._listening() and answers_ping(self.host, self.port, context=context)):
            if self.process.poll() is not None:
                raise LaunchFailed(
                    f"the middleware on {self.address} exited with {self.process.returncode}:\n"
                    + self.log_text()[-3000:]
                )
            if time.monotonic() > deadline:
                raise LaunchFailed(f"the middleware on {self.address} did not start in time")
            time.sleep(0.05)

    def _listening(self) -> bool:
        """Whether this child itself listens on the port."""
        try:
            sockets = psutil.Process(self.process.pid).net_connections(kind="tcp")
        except psutil.Error:
            return False
        return any(s.status == psutil.CONN_LISTEN and s.laddr.port == self.port for s in sockets)

    async def ready(self, timeout: float = START_TIMEOUT) -> None:
        await asyncio.to_thread(self.wait_ready, timeout)

    def stop(self, grace: float = STOP_GRACE) -> int:
        """SIGTERM, then SIGKILL after ``grace`` seconds; returns the exit code."""
        self.terminate()
        return self.wait_stopped(grace)

    def terminate(self) -> None:
        """Ask it to stop (SIGTERM): it finishes its requests and unregisters."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    def wait_stopped(self, grace: float) -> int:
        """Wait for it to exit, SIGKILL after ``grace`` seconds; the exit code."""
        try:
            self.process.wait(grace)
        except subprocess.TimeoutExpired:
            self.process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(5)
        return self.process.returncode

    async def stopped(self, grace: float = STOP_GRACE) -> int:
        return await asyncio.to_thread(self.stop, grace)


def stop_all(servers: list[Middleware], grace: float = STOP_GRACE) -> None:
    """SIGTERM every one at once, then wait for each (SIGKILL past the grace)."""
    for server in servers:
        server.terminate()
    deadline = time.monotonic() + grace
    for server in servers:
        server.wait_stopped(max(0.1, deadline - time.monotonic()))
