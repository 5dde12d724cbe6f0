"""The measurement hook: one sane record per call."""

from __future__ import annotations

import time

from client_harness import register

import courier
from courier import protocol
from helpers.names import Unique
from helpers.servers import ServerProcess, address

# From the frame layout in docs/protocol.md: a 12-byte header; PONG is a status byte
# and an 8-byte server time.
PING_BYTES = 12
PONG_BYTES = 12 + 1 + 8


async def test_every_call_leaves_one_record(servers: list[ServerProcess], unique: Unique) -> None:
    server = address(servers[1])
    name = unique("measured")
    await register(server, name)

    calls: list[courier.CallRecord] = []
    began = time.time_ns()
    started = time.perf_counter_ns()
    async with courier.AsyncClient.connect(
        server, name=name, recorder=lambda row: calls.append(courier.CallRecord._make(row))
    ) as client:
        await client.ping()
        queue = await client.create_queue(unique("q"))
        await client.send(queue, "measure me")
        await client.pop(queue)
        await client.pop(queue)
    elapsed = time.perf_counter_ns() - started
    ended = time.time_ns()

    assert [(call.operation, call.status) for call in calls] == [
        ("login_start", "OK"),
        ("login_proof", "OK"),
        ("ping", "OK"),
        ("create_queue", "OK"),
        ("send", "OK"),
        ("pop", "OK"),
        ("pop", "QUEUE_EMPTY"),
        ("logout", "OK"),
    ]
    assert {call.server for call in calls} == {server}
    # The LOGIN_PROOF too: its record takes the id from its reply, as the server's does;
    # before it, the LOGIN_START's has none (0), as the server's has not either.
    assert [call.client_id for call in calls] == [0] + [client.client_id] * (len(calls) - 1)
    request_ids = [call.request_id for call in calls]
    assert request_ids == sorted(set(request_ids))
    for call in calls:
        assert began <= call.start_ns <= ended
        assert 0 < call.response_ns <= elapsed
        assert 0 < call.serialize_ns < call.response_ns
        assert 0 < call.deserialize_ns < call.response_ns
        assert call.bytes_sent >= protocol.HEADER_SIZE
        assert call.bytes_received > protocol.HEADER_SIZE  # every reply has a status
    # The send's record carries the id it stored, the pop's the id it took.
    send, pop = calls[4:6]
    assert send.message_ids == pop.message_ids and len(send.message_ids) == 1
    assert send.queue_ids == pop.queue_ids == (queue.id,)
    assert [call.message_ids for call in calls if call not in (send, pop)] == [()] * 6
    ping = calls[2]
    assert (ping.bytes_sent, ping.bytes_received) == (PING_BYTES, PONG_BYTES)
    starts = [call.start_ns for call in calls]
    assert starts == sorted(starts)
