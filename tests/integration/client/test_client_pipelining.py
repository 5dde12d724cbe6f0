"""Many calls in flight on one connection: every reply reaches its own caller."""

from __future__ import annotations

import asyncio

from client_harness import register

import courier
from helpers.names import Unique
from helpers.servers import ServerProcess, address

CALLS = 1000


async def test_a_thousand_concurrent_calls_on_one_client(
    servers: list[ServerProcess], unique: Unique
) -> None:
    server = address(servers[0])
    name = unique("busy")
    await register(server, name)
    calls: list[courier.CallRecord] = []
    async with courier.AsyncClient.connect(
        server, name=name, recorder=lambda row: calls.append(courier.CallRecord._make(row))
    ) as client:
        queue = await client.create_queue(unique("q"))
        bodies = [f"message {n}" for n in range(CALLS)]

        sent = await asyncio.gather(*(client.send(queue.id, body) for body in bodies))
        body_of = {ids[0]: body for ids, body in zip(sent, bodies, strict=True)}
        assert len(body_of) == CALLS

        popped = await asyncio.gather(*(client.pop(queue.id) for _ in range(CALLS)))
        assert {message.id: message.text for message in popped if message} == body_of
        assert await client.pop(queue.id) is None

    request_ids = [call.request_id for call in calls]
    assert len(set(request_ids)) == len(request_ids)
    assert sum(call.operation == "send" and call.status == "OK" for call in calls) == CALLS
