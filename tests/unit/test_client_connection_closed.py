"""A call on a connection whose transport closed before its reader saw the end.

A reset found by a write closes the transport at once, while the reader meets the
end of the stream only on its next turn. uvloop raises RuntimeError on a write to
that closed transport; the call must fail as ConnectionLost instead, so that a
session fails over (seen under `courier bench chaos`). The scenario runs on
uvloop in a thread of its own, away from the suite's event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures

import pytest
import uvloop

from courier import errors, protocol
from courier.client import connection

LOOPBACK = "127.0.0.1"


async def call_after_the_transport_closed() -> None:
    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        writer.close()

    server = await asyncio.start_server(hold, LOOPBACK, 0)
    port = server.sockets[0].getsockname()[1]
    link = await connection.Connection.open((LOOPBACK, port), timeout=5)
    try:
        link._transport.abort()  # closed; the reader has not run since
        assert not link.closed
        with pytest.raises(errors.ConnectionLost, match="the connection was closed"):
            await link.exchange(1, protocol.encode(1, protocol.Ping()), timeout=5)
        assert link.closed
        link.post(protocol.encode(2, protocol.Ping()))  # dropped, without an error
    finally:
        await link.close()
        server.close()
        await server.wait_closed()


def test_a_call_on_a_closed_transport_is_a_lost_connection_on_uvloop() -> None:
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as thread:
        thread.submit(uvloop.run, call_after_the_transport_closed()).result(timeout=30)
