"""The measurement hook, on an in-process server, and `courier serve --mock`."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
from server_harness import Connect, WireClient, log_in_new

from courier import config, models
from courier.errors import Status
from courier.protocol import frames
from courier.protocol.constants import Opcode
from courier.server import app, handlers, measurement_hook
from helpers.servers import StartServer


@pytest.fixture
async def recorded(
    dsn: str,
) -> AsyncIterator[tuple[WireClient, list[measurement_hook.RequestRecord]]]:
    records: list[measurement_hook.RequestRecord] = []
    settings = config.ServerSettings(
        dsn=dsn, port=0, heartbeat_interval=0.2, instance_ttl=2, open_login=True
    )
    server = app.Server(
        settings, recorder=lambda row: records.append(measurement_hook.RequestRecord._make(row))
    )
    host, _, port = (await server.start()).rpartition(":")
    client = await WireClient.connect((host, int(port)))
    try:
        yield client, records
    finally:
        await client.close()
        await server.stop()


async def test_one_record_per_request_with_consistent_times(
    recorded: tuple[WireClient, list[measurement_hook.RequestRecord]],
) -> None:
    client, records = recorded
    before = time.time_ns()
    await client.ok(frames.Ping())
    assert await client.error(frames.ListQueues()) == Status.NOT_LOGGED_IN
    me = await log_in_new(client, "measured")
    queue = (await client.ok(frames.CreateQueue("q"))).queue  # type: ignore[union-attr]
    assert await client.error(frames.Read(queue.id, None, models.Order.TIME, pop=True)) == (
        Status.QUEUE_EMPTY
    )
    after = time.time_ns()

    summary = [(r.request_id, r.operation, r.status, r.client_id) for r in records]
    assert summary == [
        (1, "ping", "OK", 0),
        (2, "list_queues", "NOT_LOGGED_IN", 0),
        (3, "register", "OK", 0),
        (4, "login", "OK", me.id),
        (5, "create_queue", "OK", me.id),
        (6, "pop", "QUEUE_EMPTY", me.id),
    ]
    for record in records:
        assert before <= record.receive_ns <= after
        parts = (record.queued_ns, record.deserialize_ns, record.serialize_ns)
        assert all(part >= 0 for part in parts)
        assert record.total_ns >= sum(parts) + record.db_round_trip_ns
    ping, refused, *database_calls = records
    for record in (ping, refused):
        assert (record.pool_wait_ns, record.db_round_trip_ns, record.db_exec_ns) == (0, 0, 0)
    for record in database_calls:
        assert record.db_round_trip_ns > 0
        assert 0 < record.db_exec_ns <= record.db_round_trip_ns


async def test_a_reply_that_cannot_be_encoded_is_recorded_as_the_internal_error_sent(
    recorded: tuple[WireClient, list[measurement_hook.RequestRecord]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client, records = recorded

    async def out_of_range_pong(ctx: handlers.Context, request: frames.Ping) -> frames.Pong:
        return frames.Pong(server_time_ns=2**64)  # wider than the wire's i64

    monkeypatch.setitem(handlers.HANDLERS, Opcode.PING, out_of_range_pong)
    assert await client.error(frames.Ping()) == Status.INTERNAL
    monkeypatch.undo()
    await client.ok(frames.Ping())

    assert [(r.request_id, r.operation, r.status) for r in records] == [
        (1, "ping", "INTERNAL"),
        (2, "ping", "OK"),
    ]


async def test_mock_server_answers_without_a_database(
    start_server: StartServer, connect: Connect
) -> None:
    server = await start_server(dsn="postgresql://nobody@127.0.0.1:1/none", mock=True)
    client = await connect(server)
    login = await client.ok(frames.Login(None, "anyone"))
    assert isinstance(login, frames.ClientReply)
    sent = await client.ok(frames.Send((1, 2), b"x", None, 5, None))
    assert isinstance(sent, frames.MessageIdsReply) and len(sent.ids) == 2
    for request in (
        frames.Read(1, None, models.Order.TIME, pop=True),
        frames.Receive(1, None, models.Order.TIME, timeout_ms=10_000),
        frames.AwaitResponse(1, 3, timeout_ms=10_000),
    ):
        assert isinstance(await client.ok(request), frames.MessageReply)
    assert isinstance(await client.ok(frames.QueuesForMe()), frames.QueueListReply)
    # The mock derives a client's id from its name, so a lookup agrees with the login.
    found = await client.ok(frames.GetClient(None, "anyone"))
    assert found == frames.ClientIdentityReply(models.ClientIdentity(login.client.id, "anyone"))
