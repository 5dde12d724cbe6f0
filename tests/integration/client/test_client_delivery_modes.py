"""Delivery modes through real servers, with the async and the sync client: a
non-persistent send, batch message, publish, transaction operation and reply is
stored unlogged, and is read, ordered, waited for, leased and acknowledged like a
persistent one beside it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from client_harness import Connect, logged_in, register

import courier
from courier import errors
from helpers.names import Unique
from helpers.servers import ServerProcess, address
from helpers.storage import persistence


async def test_every_way_to_send_can_skip_the_log(
    connect: Connect, servers: list[ServerProcess], unique: Unique, module_dsn: str
) -> None:
    client = await logged_in(connect, servers[0], unique("modes"))
    queue = await client.create_queue(unique("q"))
    await client.send(queue.id, "send-np", persistent=False)
    await client.send(queue.id, "send-p")
    await client.send_many(queue.id, ["many-np", courier.Outgoing("out-p", persistent=True)],
                           persistent=False)  # fmt: skip
    await client.send_many(queue.id, ["many-p", courier.Outgoing("out-np", persistent=False)])
    found = await persistence(module_dsn, queue.id)
    assert found == {body: not body.endswith(b"-np") for body in found}
    assert len(found) == 6


async def test_a_transaction_of_the_async_client_holds_both_modes(
    servers: list[ServerProcess], unique: Unique, module_dsn: str
) -> None:
    name = unique("tx")
    await register(address(servers[0]), name)
    async with courier.AsyncClient.connect(address(servers[0]), name=name) as client:
        queue = await client.create_queue(unique("q"))
        async with client.transaction() as tx:
            tx.send(queue.id, "tx-np", persistent=False)
            tx.send(queue.id, "tx-p")
        with pytest.raises(errors.QueueNotFound, match="operation 2 of the transaction"):
            async with client.transaction() as tx:  # all or none, across both modes
                tx.send(queue.id, "lost-np", persistent=False)
                tx.send(queue.id + 10_000, "nowhere")
    assert await persistence(module_dsn, queue.id) == {b"tx-np": False, b"tx-p": True}


def test_a_transaction_of_the_blocking_client_holds_both_modes(
    servers: list[ServerProcess], unique: Unique, module_dsn: str
) -> None:
    name = unique("sync-tx")
    asyncio.run(register(address(servers[1]), name))
    with courier.Client.connect(address(servers[1]), name=name) as client:
        queue = client.create_queue(unique("q"))
        with client.transaction() as tx:
            tx.send(queue.id, "tx-np", persistent=False)
            tx.send(queue.id, "tx-p")
    found = asyncio.run(persistence(module_dsn, queue.id))
    assert found == {b"tx-np": False, b"tx-p": True}


async def test_a_receive_takes_the_best_message_of_both_modes_and_leases_either(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    client = await logged_in(connect, servers[1], unique("order"))
    queue = await client.create_queue(unique("q"))
    await client.send(queue.id, "low-p", priority=2)
    await client.send(queue.id, "high-np", priority=9, persistent=False)
    await client.send(queue.id, "mid-np", priority=5, persistent=False)
    await client.send(queue.id, "high-p", priority=9)
    first = await client.pop(queue.id, order="priority", lease=30)
    second = await client.pop(queue.id, order="priority", lease=30)
    assert (first.text, second.text) == ("high-np", "high-p")
    await client.nack(first)  # back at its place: the best again
    again = await client.receive(queue.id, order="priority", timeout=5, lease=30)
    assert (again.text, again.deliveries) == ("high-np", 2)
    await client.ack(again)
    await client.ack(second)
    with pytest.raises(errors.LeaseExpired):
        await client.ack(again)
    rest = await client.receive_many(queue.id, max_messages=5, timeout=5)
    assert [m.text for m in rest] == ["low-p", "mid-np"]  # time order


async def test_a_waiting_receive_wakes_for_a_non_persistent_message(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    reader = await logged_in(connect, servers[0], unique("waiter"))
    writer = await logged_in(connect, servers[1], unique("sender"))
    queue = await reader.create_queue(unique("q"))
    waiting = asyncio.ensure_future(reader.receive(queue.id, timeout=10))
    await asyncio.sleep(0.3)
    await writer.send(queue.name, "wake", persistent=False)
    assert (await asyncio.wait_for(waiting, 10)).text == "wake"


async def test_a_non_persistent_request_gets_a_non_persistent_reply(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    asker = await logged_in(connect, servers[0], unique("asker"))
    worker = await logged_in(connect, servers[1], unique("worker"))
    queue = await asker.create_queue(unique("q"))

    async def serve_one() -> Any:
        request = await worker.receive(queue.name, timeout=10)
        await worker.reply(request, "done", persistent=False)
        return request

    answer, request = await asyncio.gather(
        asker.request(queue.name, "work", timeout=10, persistent=False), serve_one()
    )
    assert (request.text, answer.text) == ("work", "done")


async def test_every_subscription_gets_a_non_persistent_copy(
    connect: Connect, servers: list[ServerProcess], unique: Unique, module_dsn: str
) -> None:
    publisher = await logged_in(connect, servers[0], unique("publisher"))
    topic = await publisher.create_topic(unique("news"))
    subscriptions = [(await publisher.subscribe(topic.name, name=f"s{n}")).queue for n in range(2)]
    copies = await publisher.publish(topic, "extra!", persistent=False)
    await publisher.publish(topic, "kept")
    assert sorted(copies) == sorted(subscriptions)
    for queue_id in subscriptions:
        assert await persistence(module_dsn, queue_id) == {b"extra!": False, b"kept": True}
