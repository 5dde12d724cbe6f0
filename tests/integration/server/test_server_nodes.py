"""A middleware in front of two database nodes: each request goes to its queue's node."""

from __future__ import annotations

import asyncio
import time

import pytest

import courier
from courier import errors
from courier.db import nodes
from helpers.servers import StartServer, address


async def test_a_receive_on_the_second_node_is_woken_by_a_send_through_another_middleware(
    start_server: StartServer, dsn: str, empty_dsn: str
) -> None:
    await nodes.add_node(dsn, empty_dsn)
    server_a, server_b = await start_server(), await start_server()
    async with courier.AsyncClient.connect(address(server_a)) as setup:
        await setup.register("alice")
        await setup.register("bob")
        await setup.login(name="alice")
        one, two = await setup.create_queue("one"), await setup.create_queue("two")
    assert (nodes.node_of(one.id), nodes.node_of(two.id)) == (1, 2)
    async with (
        courier.AsyncClient.connect(address(server_a), name="bob") as bob,
        courier.AsyncClient.connect(address(server_b), name="alice") as alice,
    ):
        waiting = asyncio.create_task(bob.receive("two", timeout=10))
        await asyncio.sleep(0.3)  # bob waits before the message exists
        began = time.perf_counter()
        [sent] = await alice.send("two", "hello")
        received = await waiting
        assert received is not None and (received.id, received.text) == (sent, "hello")
        assert time.perf_counter() - began < 5  # woken by node 2's notification
        with pytest.raises(errors.BadRequest, match="spans nodes 1, 2"):
            await alice.send(["one", "two"], "to both")
        assert {queue.name for queue in await bob.list_queues()} == {"one", "two"}
        assert (await bob.get_queue("two")).id == two.id


async def test_a_node_added_while_the_middleware_runs_takes_new_queues(
    start_server: StartServer, dsn: str, empty_dsn: str
) -> None:
    server = await start_server()
    async with courier.AsyncClient.connect(address(server)) as client:
        await client.register("alice")
        await client.login(name="alice")
        first = await client.create_queue("before")
        await nodes.add_node(dsn, empty_dsn)
        deadline = time.monotonic() + 10
        for attempt in range(1000):  # the middleware looks at the list of nodes every 2 s
            second = await client.create_queue(f"after-{attempt}")
            if nodes.node_of(second.id) == 2:
                break
            await client.delete_queue(second.name)
            assert time.monotonic() < deadline, "the new node was never linked"
            await asyncio.sleep(0.2)
        assert nodes.node_of(first.id) == 1
        await client.send(second.name, "on node 2")
        popped = await client.pop(second.name)
        assert popped is not None and popped.text == "on node 2"


async def test_producers_and_consumers_of_a_replicated_queue_are_balanced_over_its_members(
    start_server: StartServer, dsn: str, empty_dsn: str
) -> None:
    await nodes.add_node(dsn, empty_dsn)
    server = await start_server()
    names = ["p1", "p2", "c1", "c2"]
    async with courier.AsyncClient.connect(address(server)) as setup:
        for name in names:
            await setup.register(name)
        await setup.login(name="p1")
        created = await setup.create_replicated_queue("orders", 2)
    assert [member.node for member in created.members] == [1, 2]
    connected = [courier.AsyncClient.connect(address(server), name=name) for name in names]
    p1, p2, c1, c2 = [await client.__aenter__() for client in connected]
    try:
        producers = [await p1.producer("orders"), await p2.producer("orders")]
        consumers = [await c1.consumer("orders"), await c2.consumer("orders")]
        assert sorted(p.member for p in producers) == sorted(c.member for c in consumers) == [1, 2]
        for producer in producers:
            await producer.send(f"from member {producer.member}")
        for consumer in consumers:  # each consumer reads what its member's producer sent
            message = await consumer.receive(timeout=5)
            assert message is not None and message.text == f"from member {consumer.member}"
        state = await p1.get_replicated_queue("orders")
        assert [(m.producers, m.consumers, m.length) for m in state.members] == [(1, 1, 0)] * 2
        await producers[0].leave()
        await c2.close()  # a session that ends gives its place up
        state = await p1.get_replicated_queue("orders")
        assert sum(m.producers for m in state.members) == 1
        assert sum(m.consumers for m in state.members) == 1
        with pytest.raises(errors.QueueNotFound):
            await p1.producer("nothing")
    finally:
        for client in (p1, p2, c1):
            await client.close()


async def test_requests_replies_priorities_and_leases_work_through_a_member_on_node_2(
    start_server: StartServer, dsn: str, empty_dsn: str
) -> None:
    await nodes.add_node(dsn, empty_dsn)
    server = await start_server()
    async with courier.AsyncClient.connect(address(server)) as setup:
        for name in ("asker", "worker", "first"):
            await setup.register(name)
        await setup.login(name="first")
        await setup.create_replicated_queue("rpc", 2)
        await setup.producer("rpc")  # member 1 gets a producer and a consumer first,
        await setup.consumer("rpc")  # so the next pair goes to member 2, on node 2
        async with (
            courier.AsyncClient.connect(address(server), name="asker") as asker,
            courier.AsyncClient.connect(address(server), name="worker") as worker,
        ):
            await _ask_and_lease(asker, worker)


async def _ask_and_lease(asker: courier.AsyncClient, worker: courier.AsyncClient) -> None:
    producer = await asker.producer("rpc")
    consumer = await worker.consumer("rpc")
    assert producer.queue == consumer.queue and nodes.node_of(producer.queue) == 2

    async def serve_one() -> None:
        request = await consumer.receive(timeout=10)
        assert request is not None
        await worker.reply(request, request.body.upper())

    serving = asyncio.create_task(serve_one())
    answer = await asker.request(producer.queue, "hello", timeout=10)
    await serving
    assert answer.text == "HELLO"
    await producer.send("low", priority=1)
    await producer.send("high", priority=9)
    leased = await consumer.receive(timeout=5, order="priority", lease=30)
    assert leased is not None and leased.text == "high" and leased.delivery is not None
    assert nodes.node_of(leased.delivery) == nodes.node_of(producer.queue)
    await worker.ack(leased)
    rest = await consumer.pop()
    assert rest is not None and rest.text == "low"
