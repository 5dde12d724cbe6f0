"""A connection runs at most MAX_IN_FLIGHT requests at once: beyond that it reads
nothing more from its peer until one of them is answered."""

from __future__ import annotations

import asyncio

import pytest
from server_harness import WireClient, log_in_new

from courier import config, models
from courier.errors import Status
from courier.protocol import frames
from courier.server import app, connection

WAIT_MS = 600


async def test_a_request_beyond_the_limit_is_read_only_once_one_ends(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connection, "MAX_IN_FLIGHT", 2)
    server = app.Server(config.ServerSettings(dsn=dsn, port=0, open_login=True))
    host, _, port = (await server.start()).rpartition(":")
    client = await WireClient.connect((host, int(port)))
    try:
        await log_in_new(client, "limited")
        queue = (await client.ok(frames.CreateQueue("empty"))).queue  # type: ignore[union-attr]
        receive = frames.Receive(queue.id, None, models.Order.TIME, timeout_ms=WAIT_MS)
        waits = [client.submit(receive), client.submit(receive)]  # both slots taken
        ping = client.submit(frames.Ping())
        answered: list[str] = []
        for name, future in (("wait", waits[0]), ("wait", waits[1]), ("ping", ping)):
            future.add_done_callback(lambda _, name=name: answered.append(name))
        replies = await asyncio.wait_for(asyncio.gather(*waits, ping), timeout=10)
    finally:
        await client.close()
        await server.stop()

    assert answered[0] == "wait"  # the ping was read only once a wait had ended
    assert [type(reply) for reply in replies] == [frames.ErrorReply, frames.ErrorReply, frames.Pong]
    assert [reply.status for reply in replies[:2]] == [Status.QUEUE_EMPTY] * 2  # type: ignore[union-attr]
