"""Typed properties and selectors through real servers, with the async and the sync
client: every type comes back as sent by every kind of send and read; a selector
narrows pop, peek, receive, pop_many and receive_many; a bad one is refused with
BadSelector and the connection goes on serving; two blocked receivers with
different selectors each get their own messages promptly."""

from __future__ import annotations

import asyncio
import time

import pytest
from client_harness import Connect, address, logged_in

import courier
from courier import errors
from helpers.names import Unique
from helpers.properties import TYPED, typed
from helpers.servers import ServerProcess


async def registered(server: ServerProcess, name: str) -> courier.AsyncClient:
    """An async client logged in as a newly registered ``name``."""
    anonymous = await courier.AsyncClient.connect(address(server))
    await anonymous.register(name)
    await anonymous.close()
    return await courier.AsyncClient.connect(address(server), name=name)


async def test_every_property_type_round_trips_through_every_send_and_read(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    client = await logged_in(connect, servers[0], unique("typed"))
    queue = await client.create_queue(unique("q"))
    topic = unique("t")
    await client.create_topic(topic)
    subscription = await client.subscribe(topic)
    await client.send(queue.id, "send", properties=TYPED)
    await client.send_many(queue.id, ["many", courier.Outgoing("own", properties=TYPED)],
                           properties=TYPED)  # fmt: skip
    await client.publish(topic, "published", properties=TYPED)
    read = [await client.pop(queue.id), *await client.receive_many(queue.id, max_messages=5)]
    read.append(await client.receive(subscription, timeout=5))
    assert [m.text for m in read] == ["send", "many", "own", "published"]
    for message in read:
        assert typed(message.properties) == typed(TYPED)
    assert read[0].properties["on"] is True and type(read[0].properties["one"]) is int


async def test_a_transaction_s_send_and_publish_keep_every_type(
    servers: list[ServerProcess], unique: Unique
) -> None:
    client = await registered(servers[1], unique("tx-typed"))
    try:
        queue = await client.create_queue(unique("q"))
        topic = await client.create_topic(unique("t"))
        subscription = await client.subscribe(topic)
        async with client.transaction() as tx:
            tx.send(queue.id, "sent", properties=TYPED)
            tx.publish(topic, "published", properties=TYPED)
        sent = await client.pop(queue.id, selector="on AND NOT off AND one = 1 AND whole = 2")
        published = await client.pop(subscription, selector=f"low = {-(2**63)} AND big > 1e299")
        assert typed(sent.properties) == typed(TYPED) == typed(published.properties)
    finally:
        await client.close()


async def test_a_selector_narrows_every_kind_of_read(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    client = await logged_in(connect, servers[1], unique("narrow"))
    queue = await client.create_queue(unique("q"))
    for n in range(6):
        kind = "order" if n % 2 else "invoice"
        await client.send(queue.id, f"m{n}", properties={"kind": kind, "n": n, "rush": n > 3})
    assert (await client.peek(queue.id, selector="kind = 'order'")).text == "m1"
    assert (await client.pop(queue.id, selector="rush AND kind = 'invoice'")).text == "m4"
    received = await client.receive(queue.id, timeout=5, selector="n IN (3, 5) AND NOT rush")
    assert received.text == "m3"
    taken = await client.pop_many(queue.id, 10, selector="kind <> 'order'")
    assert [m.text for m in taken] == ["m0", "m2"]
    assert await client.receive_many(queue.id, max_messages=5, selector="n > 100") == []
    rest = await client.receive_many(queue.id, max_messages=5, timeout=1, selector="n >= 0")
    assert [m.text for m in rest] == ["m1", "m5"]


@pytest.mark.parametrize(
    ("selector", "where"),
    [
        ("kind = ", "character 8"),
        ("kind == 'x'", "character 7"),
        ("'; DROP TABLE courier_messages; --", "character 1"),
        ("a = 1 AND", "character 10"),
        ("(" * 40 + "a = 1" + ")" * 40, "nested deeper than 16"),
        (" OR ".join(f"a = {n}" for n in range(70)), "more than 64 terms"),
        ("a = '" + "x" * 1100 + "'", "a selector is at most 1024"),
    ],
)
async def test_a_bad_selector_is_refused_and_the_connection_goes_on(
    connect: Connect, servers: list[ServerProcess], unique: Unique, selector: str, where: str
) -> None:
    client = await logged_in(connect, servers[0], unique("bad-sel"))
    queue = await client.create_queue(unique("q"))
    await client.send(queue.id, "kept", properties={"a": 1})
    for read in (
        lambda: client.pop(queue.id, selector=selector),
        lambda: client.receive(queue.id, timeout=1, selector=selector),
        lambda: client.receive_many(queue.id, max_messages=3, timeout=1, selector=selector),
    ):
        with pytest.raises(errors.BadSelector) as raised:
            await read()
        assert where in str(raised.value)
    assert (await client.pop(queue.id)).text == "kept"


async def test_an_empty_selector_is_refused_by_the_client(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    client = await logged_in(connect, servers[0], unique("empty-sel"))
    queue = await client.create_queue(unique("q"))
    with pytest.raises(errors.BadSelector, match="empty"):
        await client.pop(queue.id, selector="  ")


async def test_blocked_receivers_with_different_selectors_each_get_their_own(
    servers: list[ServerProcess], unique: Unique
) -> None:
    """A receiver woken by a message it does not match hands the wake-up on: the
    message reaches the receiver that matches at once, not when that one's wait
    ends, and neither starves. Each message is sent alone, while both wait."""
    names = [unique("orders"), unique("invoices"), unique("sender")]
    clients = [await registered(servers[0], name) for name in names]
    try:
        orders, invoices, sender = clients
        queue = await sender.create_queue(unique("q"))
        got: dict[str, list[str]] = {"order": [], "invoice": []}

        async def take(client: courier.AsyncClient, kind: str) -> None:
            while True:
                message = await client.receive(queue.id, timeout=30, selector=f"kind = '{kind}'")
                if message is not None:
                    got[kind].append(message.text)

        readers = [asyncio.ensure_future(take(orders, "order"))]
        await asyncio.sleep(0.2)  # the orders reader waits first: it is woken first
        readers.append(asyncio.ensure_future(take(invoices, "invoice")))
        await asyncio.sleep(0.2)
        for n, kind in enumerate(["invoice", "invoice", "order", "invoice", "order", "order"]):
            sent = time.monotonic()
            await sender.send(queue.id, f"{kind}-{n}", properties={"kind": kind})
            while f"{kind}-{n}" not in got[kind]:
                assert time.monotonic() - sent < 2.0, (kind, n, got)  # waits run 30 s
                await asyncio.sleep(0.01)
        assert got == {"order": ["order-2", "order-4", "order-5"],
                       "invoice": ["invoice-0", "invoice-1", "invoice-3"]}  # fmt: skip
        for reader in readers:
            reader.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
        assert await sender.pop(queue.id) is None
    finally:
        for client in clients:
            await client.close()


async def test_a_message_no_waiter_matches_stays_in_the_queue(
    servers: list[ServerProcess], unique: Unique
) -> None:
    waiter_client = await registered(servers[1], unique("w"))
    sender = await registered(servers[1], unique("s"))
    try:
        queue = await sender.create_queue(unique("q"))
        waiting = asyncio.ensure_future(
            waiter_client.receive(queue.id, timeout=1.0, selector="kind = 'wanted'")
        )
        await asyncio.sleep(0.2)
        await sender.send(queue.id, "unwanted", properties={"kind": "other"})
        assert await waiting is None
        assert (await sender.pop(queue.id)).text == "unwanted"
    finally:
        await waiter_client.close()
        await sender.close()
