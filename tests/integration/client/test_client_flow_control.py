"""A server that takes none of the client's bytes: once the client's buffer for it is
full, a call waits to write within its own timeout, and fails at once when the
connection drops."""

from __future__ import annotations

import asyncio
import socket

import pytest

from courier import errors, protocol
from courier.client import connection

LOOPBACK = "127.0.0.1"
CHUNK = b"\0" * 1_000_000
SMALL_BUFFER = 4096


async def fill_the_transport(link: connection.Connection) -> None:
    """Write until the transport holds more than its high-water mark, so that writing
    pauses (the kernel's buffers were made small, so it stays paused)."""
    _, high = link._transport.get_write_buffer_limits()
    while link._transport.get_write_buffer_size() <= high:
        link.post(CHUNK)
        await asyncio.sleep(0)


async def test_a_call_behind_a_server_that_reads_nothing_waits_then_fails_with_the_link() -> None:
    accepted: asyncio.Queue[asyncio.StreamWriter] = asyncio.Queue()

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await accepted.put(writer)
        await asyncio.sleep(3600)  # reads nothing

    listening = socket.socket()
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_BUFFER)  # accepted ones too
    listening.bind((LOOPBACK, 0))
    server = await asyncio.start_server(hold, sock=listening)
    link = await connection.Connection.open(listening.getsockname(), timeout=5)
    link._transport.get_extra_info("socket").setsockopt(
        socket.SOL_SOCKET, socket.SO_SNDBUF, SMALL_BUFFER
    )
    try:
        await accepted.get()
        await fill_the_transport(link)
        with pytest.raises(errors.RequestTimeout):
            await link.exchange(1, protocol.encode(1, protocol.Ping()), timeout=0.2)
        waiting = asyncio.ensure_future(
            link.exchange(2, protocol.encode(2, protocol.Ping()), timeout=30)
        )
        await asyncio.sleep(0.1)
        assert not waiting.done()
        link._transport.abort()  # dropped with the buffer still full
        with pytest.raises(errors.ConnectionLost):
            await asyncio.wait_for(waiting, 5)
        assert link.closed
    finally:
        await link.close()
        server.close()
        await server.wait_closed()
