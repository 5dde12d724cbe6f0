"""Message properties through real servers, with the async and the sync client: sent
with a message or published to a topic, read back by every kind of read, kept through
leases, NACKs, delays and dead letters, and refused beyond their limits before
anything is sent."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from client_harness import Connect, logged_in

import courier
from courier import errors
from helpers.names import Unique
from helpers.servers import ServerProcess

TRACE = {"trace": "t-17", "content-type": "text/plain", "note": "façade ✓"}


async def test_a_sent_message_is_read_with_its_properties(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    client = await logged_in(connect, servers[0], unique("props"))
    queue = await client.create_queue(unique("q"))
    await client.send(queue.id, "with", properties=TRACE)
    await client.send(queue.id, "without")
    peeked = await client.peek(queue.id)
    first = await client.pop(queue.id)
    second = await client.receive(queue.id, timeout=5)
    assert (peeked.properties, first.text, first.properties) == (TRACE, "with", TRACE)
    assert (second.text, second.properties) == ("without", {})


async def test_each_message_of_a_batch_carries_its_own_properties_in_order(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    client = await logged_in(connect, servers[1], unique("batch-props"))
    queue = await client.create_queue(unique("q"))
    await client.send_many(
        queue.name,
        [b"a", courier.Outgoing("b", properties={"n": "b"}), courier.Outgoing("c", properties={}),
         courier.Outgoing("d", properties={"n": "d"}, priority=9)],
        properties={"batch": "1"},
    )  # fmt: skip
    taken = await client.receive_many(queue.id, max_messages=10, timeout=5)
    assert [(m.text, m.properties) for m in taken] == [
        ("a", {"batch": "1"}), ("b", {"n": "b"}), ("c", {}), ("d", {"n": "d"}),
    ]  # fmt: skip


async def test_properties_survive_lease_nack_redelivery_and_a_dead_letter(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    client = await logged_in(connect, servers[0], unique("lease-props"))
    queue = await client.create_queue(unique("q"))
    dead = await client.create_queue(unique("dead"))
    await client.configure_queue(queue.id, max_deliveries=2, dead_letter_queue=dead)
    await client.send(queue.id, "job", properties=TRACE)
    first = await client.pop(queue.id, lease=30)
    await client.nack(first, reason="busy")
    (second,) = await client.pop_many(queue.id, 5, lease=30)
    assert (first.properties, second.properties, second.deliveries) == (TRACE, TRACE, 2)
    await client.nack(second, reason="broken")
    letter = await client.pop(dead.id)
    assert (letter.dead_from, letter.failure, letter.properties) == (queue.id, "broken", TRACE)


async def test_a_delayed_message_arrives_with_its_properties(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    client = await logged_in(connect, servers[0], unique("later-props"))
    queue = await client.create_queue(unique("q"))
    await client.send(queue.id, "later", delay=0.2, properties={"k": "v"})
    await client.send_many(queue.id, [courier.Outgoing("later too", delay=0.2)], properties=TRACE)
    assert await client.pop(queue.id) is None
    taken = await client.receive_many(queue.id, max_messages=2, min_messages=2, timeout=5,
                                      max_wait=5)  # fmt: skip
    assert {m.text: m.properties for m in taken} == {"later": {"k": "v"}, "later too": TRACE}


async def test_a_request_and_its_reply_carry_properties(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    asker = await logged_in(connect, servers[0], unique("asker"))
    worker = await logged_in(connect, servers[1], unique("worker"))
    queue = await asker.create_queue(unique("q"))

    async def serve_one() -> Any:
        request = await worker.receive(queue.name, timeout=10)
        await worker.reply(request, "done", properties={"status": "ok"})
        return request

    answer, request = await asyncio.gather(
        asker.request(queue.name, "work", timeout=10, properties={"reply-format": "text"}),
        serve_one(),
    )
    assert request.properties == {"reply-format": "text"}
    assert (answer.text, answer.properties) == ("done", {"status": "ok"})


async def test_every_subscription_gets_a_published_message_with_its_properties(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    publisher = await logged_in(connect, servers[0], unique("publisher"))
    topic = await publisher.create_topic(unique("news"))
    readers = [await logged_in(connect, servers[1], unique("reader")) for _ in range(2)]
    subscriptions = [await reader.subscribe(topic.name) for reader in readers]
    await publisher.publish(topic, "extra!", properties=TRACE)
    await publisher.publish(topic, "plain")
    for reader, subscription in zip(readers, subscriptions, strict=True):
        taken = await reader.receive_many(subscription, max_messages=2, min_messages=2,
                                          timeout=5, max_wait=5)  # fmt: skip
        assert [(m.text, m.properties) for m in taken] == [("extra!", TRACE), ("plain", {})]


@pytest.mark.parametrize(
    ("properties", "reason"),
    [
        ({f"k{n}": "v" for n in range(65)}, "65 properties; a message carries at most 64"),
        ({"": "v"}, "property key 1 is empty"),
        ({"k" * 256: "v"}, "a key is 1 to 255 bytes"),
        ({"k": "v" * 4097}, "a value is at most 4096 bytes"),
        ({"k": [1]}, "a value is text, an integer, a float or a boolean, not list"),
        ({"k": 2**63}, "outside the 64-bit range"),
        ({"k": float("inf")}, "the float inf is not finite"),
        ({"k": None}, "not NoneType"),
        ({"k": "a\x00"}, "holds a NUL character"),
        ({f"k{n}": "v" * 4000 for n in range(5)}, "a message carries at most 16384"),
    ],
)
async def test_properties_beyond_the_limits_are_refused_and_nothing_is_stored(
    connect: Connect, servers: list[ServerProcess], unique: Unique,
    properties: dict[str, Any], reason: str,
) -> None:  # fmt: skip
    client = await logged_in(connect, servers[0], unique("bad-props"))
    queue = await client.create_queue(unique("q"))
    with pytest.raises(errors.BadRequest, match=reason):
        await client.send(queue.id, "x", properties=properties)
    batch = [courier.Outgoing("fine"), courier.Outgoing("bad", properties=properties)]
    with pytest.raises(errors.BadRequest, match=f"message 2 of the batch: .*{reason}"):
        await client.send_many(queue.id, batch)
    topic = await client.create_topic(unique("t"))
    subscription = await client.subscribe(topic)
    with pytest.raises(errors.BadRequest, match=reason):
        await client.publish(topic, "x", properties=properties)
    assert await client.pop(queue.id) is None
    assert await client.pop(subscription) is None
