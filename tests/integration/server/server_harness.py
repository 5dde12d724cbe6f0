"""Real `courier serve` processes on free loopback ports, and a raw wire client.

The client speaks the protocol package directly (no client library), so the tests
see exactly the frames the server sends.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from courier import errors, models, protocol
from courier.protocol import frames

COURIER = Path(sys.executable).with_name("courier")
READY_LINE = "Courier middleware listening on"
START_TIMEOUT = 20.0

# The factory fixtures of conftest.py.
StartServer = Callable[..., Awaitable["ServerProcess"]]
Connect = Callable[["ServerProcess"], Awaitable["WireClient"]]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


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
        env = {k: v for k, v in os.environ.items() if not k.startswith("COURIER_")}
        with self.log_path.open("wb") as log:
            # Popen returns once the child is forked; it does not wait for it.
            self.process = subprocess.Popen(  # noqa: ASYNC220
                self.args, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env
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


class WireClient:
    """A raw protocol connection: send frames, match replies to requests by id."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.decoder = protocol.Decoder(64 * 1024 * 1024)
        self.ids = itertools.count(1)
        self.pending: dict[int, asyncio.Future[frames.Reply]] = {}
        self.unsolicited: asyncio.Queue[tuple[frames.RawFrame, frames.Reply]] = asyncio.Queue()
        self.closed = asyncio.Event()
        self.reading = asyncio.get_running_loop().create_task(self._read_replies())

    @classmethod
    async def connect(cls, address: tuple[str, int]) -> WireClient:
        reader, writer = await asyncio.open_connection(*address)
        return cls(reader, writer)

    async def _read_replies(self) -> None:
        try:
            while data := await self.reader.read(65536):
                for raw in self.decoder.feed(data):
                    reply = protocol.parse(raw)
                    assert raw.is_response
                    future = self.pending.pop(raw.request_id, None)
                    if future is None:
                        self.unsolicited.put_nowait((raw, reply))  # type: ignore[arg-type]
                    else:
                        future.set_result(reply)  # type: ignore[arg-type]
        except ConnectionError:
            pass
        finally:
            self.closed.set()
            for future in self.pending.values():
                if not future.done():
                    future.set_exception(errors.ConnectionLost())

    def submit(self, request: frames.Request) -> asyncio.Future[frames.Reply]:
        """Send one request now; the future resolves to its reply."""
        request_id = next(self.ids)
        future: asyncio.Future[frames.Reply] = asyncio.get_running_loop().create_future()
        self.pending[request_id] = future
        self.writer.write(protocol.encode(request_id, request))
        return future

    async def call(self, request: frames.Request, timeout: float = 10.0) -> frames.Reply:
        return await asyncio.wait_for(self.submit(request), timeout)

    async def ok(self, request: frames.Request) -> frames.Reply:
        """Call and insist on success."""
        reply = await self.call(request)
        assert not isinstance(reply, frames.ErrorReply), reply
        return reply

    async def error(self, request: frames.Request) -> errors.Status:
        """Call and insist on failure; returns the status."""
        reply = await self.call(request)
        assert isinstance(reply, frames.ErrorReply), reply
        return reply.status

    def send_raw(self, data: bytes) -> None:
        self.writer.write(data)

    async def next_unsolicited(self, timeout: float = 5.0) -> tuple[frames.RawFrame, frames.Reply]:
        return await asyncio.wait_for(self.unsolicited.get(), timeout)

    async def wait_closed_by_server(self, timeout: float = 5.0) -> None:
        await asyncio.wait_for(self.closed.wait(), timeout)

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError):
            await self.writer.wait_closed()
        self.reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.reading


def raw_frame(
    opcode: int,
    request_id: int,
    body: bytes = b"",
    *,
    version: int = protocol.VERSION,
    flags: int = 0,
) -> bytes:
    """Hand-built frame bytes, for input the encoder refuses to produce."""
    header = protocol.constants.HEADER.pack(version, opcode, flags, request_id, len(body))
    return header + body


async def log_in_new(
    client: WireClient, name: str, mode: models.ClientMode = models.ClientMode.READ_WRITE
) -> models.ClientInfo:
    """Register a client with this name and log this connection in as it."""
    registered = await client.ok(frames.Register(name, mode))
    assert isinstance(registered, frames.ClientReply)
    logged_in = await client.ok(frames.Login(client_id=registered.client.id, name=None))
    assert isinstance(logged_in, frames.ClientReply)
    return logged_in.client
