"""Many calls in flight on one connection: every reply reaches its own caller."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import courier
from integration.client.client_fixtures import address
from integration.server.server_harness import ServerProcess

CALLS = 1000


async def test_a_thousand_concurrent_calls_on_one_client(
    servers: list[ServerProcess], unique: Callable[[str], str]
) -> None:
    server = address(servers[0])
    name = unique("busy")
    async with courier.AsyncClient.connect(server) as anonymous:
        await anonymous.register(name)
    calls: list[courier.CallRecord] = []
    async with courier.AsyncClient.connect(server, name=name, recorder=calls.append) as client:
        queue = await client.create_queue(unique("q"))
        bodies = [f"message {n}" for n in range(CALLS)]

        sent = await asyncio.gather(*(client.send(queue.id, body) for body in bodies))
        body_of = {ids[0]: body for ids, body in zip(sent, bodies, strict=True)}
        assert len(body_of) == CALLS

        popped = await asyncio.gather(*(client.pop(queue.id) for _ in range(CALLS)))
        assert {message.id: message.body for message in popped if message} == body_of
        assert await client.pop(queue.id) is None

    request_ids = [call.request_id for call in calls]
    assert len(set(request_ids)) == len(request_ids)
    assert sum(call.operation == "send" and call.status == "OK" for call in calls) == CALLS
