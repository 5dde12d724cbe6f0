"""The client's connection against servers that misbehave at the transport: one that
takes none of the client's bytes, one that stops sending while bytes are still
buffered for it, and one that refuses the client the moment it connects."""

from __future__ import annotations

import asyncio
import concurrent.futures
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import cast

import pytest
import uvloop

from courier import errors, protocol
from courier.client import connection
from courier.protocol import frames

LOOPBACK = "127.0.0.1"
CHUNK = b"\0" * 1_000_000
SMALL_BUFFER = 4096

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class SilentServer:
    """A server with small socket buffers whose handler reads nothing; everything it
    accepted is dropped at the end (on Python 3.12 and later ``wait_closed`` waits for
    its connections)."""

    def __init__(self, handler: Handler | None = None) -> None:
        self.handler = handler
        self.peers: asyncio.Queue[asyncio.StreamWriter] = asyncio.Queue()
        self.tasks: list[asyncio.Task[object]] = []

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.tasks.append(task)
        await self.peers.put(writer)
        if self.handler is not None:
            await self.handler(reader, writer)
        await asyncio.sleep(3600)  # reads nothing

    async def __aenter__(self) -> tuple[str, int]:
        listening = socket.socket()
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_BUFFER)  # accepted too
        listening.bind((LOOPBACK, 0))
        self.server = await asyncio.start_server(self._serve, sock=listening)
        address: tuple[str, int] = listening.getsockname()
        return address

    async def __aexit__(self, *exc: object) -> None:
        while not self.peers.empty():
            self.peers.get_nowait().transport.abort()
        for task in self.tasks:
            task.cancel()
        self.server.close()
        await self.server.wait_closed()


async def opened(address: tuple[str, int]) -> AsyncIterator[connection.Connection]:
    link = await connection.Connection.open(address, timeout=5)
    sock = link._transport.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SMALL_BUFFER)
    try:
        yield link
    finally:
        await link.close()


async def fill_the_transport(link: connection.Connection) -> None:
    """Write until the transport holds more than its high-water mark, so that writing
    pauses (the kernel's buffers are small, so it stays paused)."""
    _, high = link._transport.get_write_buffer_limits()
    while link._transport.get_write_buffer_size() <= high:
        link.post(CHUNK)
        await asyncio.sleep(0)


def ping(request_id: int) -> bytes:
    return protocol.encode(request_id, protocol.Ping())


async def test_a_call_behind_a_server_that_reads_nothing_waits_then_fails_with_the_link() -> None:
    async with SilentServer() as address:
        async for link in opened(address):
            await fill_the_transport(link)
            with pytest.raises(errors.RequestTimeout):
                await link.exchange(1, ping(1), timeout=0.2)
            waiting = asyncio.ensure_future(link.exchange(2, ping(2), timeout=30))
            await asyncio.sleep(0.1)
            assert not waiting.done()
            link._transport.abort()  # dropped with the buffer still full
            with pytest.raises(errors.ConnectionLost):
                await asyncio.wait_for(waiting, 5)
            assert link.closed


async def test_a_server_that_stops_sending_fails_the_calls_at_once() -> None:
    async def stop_sending(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(0.2)
        writer.write_eof()

    async with SilentServer(stop_sending) as address:
        async for link in opened(address):
            await fill_the_transport(link)  # so the transport cannot close at once
            waiting = asyncio.ensure_future(link.exchange(1, ping(1), timeout=30))
            with pytest.raises(errors.ConnectionLost, match="the server closed the connection"):
                await asyncio.wait_for(waiting, 5)
            assert link.closed


class Refuse(asyncio.Protocol):
    """Says SERVER_FULL as it accepts, before the client's side has even returned."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        refusal = protocol.encode(0, frames.ErrorReply(errors.Status.SERVER_FULL, "full"))
        cast(asyncio.Transport, transport).write(refusal)  # uvloop's is not a subclass
        transport.close()


async def refused_every_time(tries: int) -> list[str]:
    """Connections to a server that says SERVER_FULL the moment it accepts, and closes."""
    server = await asyncio.get_running_loop().create_server(Refuse, LOOPBACK, 0)
    address = server.sockets[0].getsockname()
    answers = []
    try:
        for n in range(1, tries + 1):
            link = await connection.Connection.open(address, timeout=5)
            try:
                await link.exchange(n, ping(n), timeout=5)
            except errors.CourierError as exc:
                answers.append(type(exc).__name__)
            finally:
                await link.close()
    finally:
        server.close()
        await server.wait_closed()
    return answers


def test_a_refusal_sent_at_once_is_never_lost_on_uvloop() -> None:
    # uvloop reads before the connection exists; those bytes must still reach it.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as thread:
        answers = thread.submit(uvloop.run, refused_every_time(100)).result(timeout=60)
    assert answers == ["ServerFull"] * 100
