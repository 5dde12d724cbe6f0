"""A raw wire client for the middleware tests (the servers come from helpers.servers).

The client speaks the protocol package directly (no client library), so the tests
see exactly the frames the server sends.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Awaitable, Callable

from courier import errors, models, protocol
from courier.protocol import frames
from helpers.servers import ServerProcess

Connect = Callable[[ServerProcess], Awaitable["WireClient"]]
"""The ``connect`` fixture of conftest.py."""


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


async def log_in_once_released(
    client: WireClient, client_id: int, within: float
) -> frames.ClientReply:
    """LOGIN as ``client_id``, again every 0.1 s while its session is still held
    elsewhere (CLIENT_ONLINE), for up to ``within`` seconds."""
    login = frames.Login(client_id, None)
    started = time.monotonic()
    while isinstance(reply := await client.call(login), frames.ErrorReply):
        assert reply.status == errors.Status.CLIENT_ONLINE
        assert time.monotonic() - started < within, "the session was never released"
        await asyncio.sleep(0.1)
    assert isinstance(reply, frames.ClientReply) and reply.client.id == client_id
    return reply
