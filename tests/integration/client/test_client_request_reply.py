"""Request/reply between clients on two different middleware servers."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from client_harness import Connect, logged_in

from courier import errors
from helpers.names import Unique
from helpers.servers import ServerProcess


async def test_request_and_reply_across_two_servers(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    asker = await logged_in(connect, servers[0], unique("asker"))
    worker = await logged_in(connect, servers[1], unique("worker"))
    queue = await asker.create_queue(unique("q"))

    async def serve_one() -> Any:
        request = await worker.receive(queue.name, timeout=10)
        await worker.reply(request, request.body.upper())
        return request

    answer, request = await asyncio.gather(
        asker.request(queue.name, "resize photo 17", timeout=10), serve_one()
    )
    assert request.sender == asker.client_id and request.context is not None
    assert answer.text == "RESIZE PHOTO 17"
    assert (answer.queue, answer.context) == (queue.id, request.context)
    assert (answer.sender, answer.receiver) == (worker.client_id, asker.client_id)
    assert await worker.pop(queue.id) is None and await asker.pop(queue.id) is None


async def test_each_requester_gets_its_own_reply(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    first = await logged_in(connect, servers[0], unique("first"))
    second = await logged_in(connect, servers[1], unique("second"))
    worker = await logged_in(connect, servers[1], unique("worker"))
    queue = await worker.create_queue(unique("q"))

    async def serve_two_in_reverse() -> None:
        requests = [await worker.receive(queue.id, timeout=10) for _ in range(2)]
        for request in reversed(requests):
            await worker.reply(request, f"for {request.sender}")

    asked = [first.request(queue.id, "a", timeout=10), second.request(queue.id, "b", timeout=10)]
    *answers, _ = await asyncio.gather(*asked, serve_two_in_reverse())
    assert [answer.text for answer in answers] == [
        f"for {first.client_id}",
        f"for {second.client_id}",
    ]


async def test_a_request_nobody_answers_times_out(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    asker = await logged_in(connect, servers[0], unique("asker"))
    queue = await asker.create_queue(unique("q"))
    with pytest.raises(errors.RequestTimeout, match=r"within 0\.2s"):
        await asker.request(queue, "hello?", timeout=0.2)
    unanswered = await asker.pop(queue)
    assert unanswered.text == "hello?" and unanswered.context is not None


async def test_only_a_request_can_be_replied_to(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    client = await logged_in(connect, servers[0], unique("plain"))
    queue = await client.create_queue(unique("q"))
    await client.send(queue, "no context")
    message = await client.pop(queue)
    with pytest.raises(errors.BadRequest, match="not a request"):
        await client.reply(message, "answer")
