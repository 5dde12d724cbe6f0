"""Batches through real servers: send_many all or none and in order, receive_many and
pop_many for their reader only, ack_many and nack_many per delivery, the limits, and
exactly once under many concurrent batch readers."""

from __future__ import annotations

import asyncio
import time

import pytest
from client_harness import Connect, logged_in

import courier
from courier import errors, protocol
from helpers.names import Unique
from helpers.servers import ServerProcess, address


async def test_send_many_stores_in_order_and_receive_many_reads_them_back(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    client = await logged_in(connect, servers[0], unique("batcher"))
    first, second = [await client.create_queue(unique(name)) for name in ("a", "b")]
    bodies = [f"message {k}".encode() for k in range(100)]
    ids = await client.send_many([first.name, second.id], bodies)
    assert len(ids) == 100 and all(len(row) == 2 for row in ids)
    taken = await client.receive_many(first.id, max_messages=60, timeout=1)
    rest = await client.pop_many(first.name, 60)
    assert [message.body for message in taken + rest] == bodies
    assert [message.id for message in taken + rest] == [row[0] for row in ids]
    assert [message.body for message in await client.pop_many(second.id, 1000)] == bodies
    assert await client.pop_many(first.id, 10) == []


async def test_each_message_may_carry_its_own_fields(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    client = await logged_in(connect, servers[0], unique("fields"))
    queue = await client.create_queue(unique("q"))
    await client.send_many(
        queue.id,
        [b"plain", courier.Outgoing("urgent", priority=9, context=42), courier.Outgoing(
            "later", delay=30), courier.Outgoing("once", dedup_id="d-1")],
        priority=3,
    )  # fmt: skip
    taken = await client.pop_many(queue.id, 10, order="priority")
    assert [(m.body, m.priority, m.context) for m in taken] == [
        (b"urgent", 9, 42), (b"plain", 3, None), (b"once", 3, None)
    ]  # fmt: skip
    again = await client.send_many(queue.id, [courier.Outgoing("once", dedup_id="d-1")])
    assert again[0][0] == taken[2].id  # a retried batch message is stored once


async def test_one_bad_message_fails_the_batch_and_nothing_is_stored(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    client = await logged_in(connect, servers[0], unique("atomic"))
    queue = await client.create_queue(unique("q"))
    limited = await client.create_queue(unique("limited"))
    await client.configure_queue(limited.id, max_messages=5)
    with pytest.raises(errors.QuotaExceeded, match="message 6 of the batch"):
        await client.send_many([queue.id, limited.id], [f"m{k}" for k in range(10)])
    with pytest.raises(errors.InvalidPriority, match="message 2 of the batch"):
        await client.send_many(queue.id, ["ok", courier.Outgoing("bad", priority=0)])
    with pytest.raises(errors.QueueNotFound):
        await client.send_many([queue.id, unique("missing")], ["a", "b"])
    assert (await client.get_queue(queue.id)).message_count == 0
    assert (await client.get_queue(limited.id)).message_count == 0


async def test_the_limits_are_checked_before_any_work(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    client = await logged_in(connect, servers[0], unique("limits"))
    queue = await client.create_queue(unique("q"))
    with pytest.raises(errors.BadRequest, match="at most 1000"):
        await client.send_many(queue.id, ["x"] * 1001)
    with pytest.raises(errors.BadRequest, match="at least one"):
        await client.send_many(queue.id, [])
    with pytest.raises(errors.BadRequest, match="max_messages"):
        await client.receive_many(queue.id, max_messages=0)
    big = b"x" * 60_000  # under the 64 KiB body limit, but 20 of them pass 1 MiB
    with pytest.raises(errors.PayloadTooLarge, match="send it in parts"):
        await client.send_many(queue.id, [big] * 20)
    assert (await client.get_queue(queue.id)).message_count == 0
    await client.send_many(queue.id, [big] * 17)
    await client.send_many(queue.id, [big] * 17)
    taken = await client.pop_many(queue.id, 100)  # the answer stops at the byte limit
    assert len(taken) == 17 and (await client.get_queue(queue.id)).message_count == 17


async def test_a_count_over_the_limit_is_refused_by_the_server(
    servers: list[ServerProcess], unique: Unique
) -> None:
    async with courier.AsyncClient.connect(address(servers[0])) as client:
        await client.register(unique("raw"))
    reader, writer = await asyncio.open_connection(*address(servers[0]).split(":"))
    login = protocol.encode(1, protocol.Login(None, unique("raw-nobody")))
    body = bytearray(protocol.encode(2, protocol.AckMany((1,))))
    body[12:14] = (1001).to_bytes(2, "big")  # the count says 1001; one id follows
    writer.write(login + bytes(body))
    await writer.drain()
    decoder = protocol.Decoder(64 * 1024 * 1024)
    replies: list[protocol.RawFrame] = []
    while len(replies) < 2:
        replies += decoder.feed(await asyncio.wait_for(reader.read(65536), 10))
    answer = protocol.parse(replies[1])
    assert isinstance(answer, protocol.ErrorReply) and "at most 1000" in answer.message
    writer.close()


async def test_a_reader_never_gets_another_readers_message(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    alice = await logged_in(connect, servers[0], unique("alice"))
    bob = await logged_in(connect, servers[1], unique("bob"))
    queue = await alice.create_queue(unique("q"))
    messages = [courier.Outgoing(f"bob {k}", receiver=bob.client_id) for k in range(5)]
    messages += [courier.Outgoing(f"anyone {k}") for k in range(5)]
    messages += [courier.Outgoing(f"alice {k}", receiver=alice.client_id) for k in range(5)]
    await alice.send_many(queue.id, messages)
    for_alice = await alice.pop_many(queue.id, 100)
    for_bob = await bob.pop_many(queue.id, 100)
    assert {m.text.split()[0] for m in for_alice} == {"alice", "anyone"}
    assert {m.text for m in for_bob} == {f"bob {k}" for k in range(5)}


async def test_receive_many_waits_for_the_first_and_then_for_min_messages(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    reader = await logged_in(connect, servers[0], unique("waiter"))
    writer = await logged_in(connect, servers[1], unique("feeder"))
    queue = await reader.create_queue(unique("q"))
    started = time.monotonic()
    assert await reader.receive_many(queue.id, max_messages=10, timeout=0.3) == []
    assert time.monotonic() - started >= 0.25

    async def feed(count: int, pause: float) -> None:
        for k in range(count):
            await asyncio.sleep(pause)
            await writer.send(queue.id, f"m{k}")

    waiting = asyncio.ensure_future(reader.receive_many(queue.id, max_messages=10, timeout=10))
    await feed(1, 0.2)
    assert [m.body for m in await waiting] == [b"m0"]  # answers once there is one

    gathering = asyncio.ensure_future(
        reader.receive_many(queue.id, max_messages=10, timeout=10, min_messages=3, max_wait=10)
    )
    await feed(3, 0.15)
    assert [m.body for m in await gathering] == [b"m0", b"m1", b"m2"]

    window = asyncio.ensure_future(
        reader.receive_many(queue.id, max_messages=10, timeout=10, min_messages=5, max_wait=0.5)
    )
    await feed(2, 0.05)
    started = time.monotonic()
    assert len(await window) == 2  # the window closed with two
    assert time.monotonic() - started < 5


async def test_ack_many_and_nack_many_answer_per_delivery(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    worker = await logged_in(connect, servers[0], unique("worker"))
    queue = await worker.create_queue(unique("q"))
    await worker.send_many(queue.id, [f"job {k}" for k in range(4)])
    leased = await worker.receive_many(queue.id, max_messages=4, timeout=1, lease=30)
    assert [m.deliveries for m in leased] == [1, 1, 1, 1]
    await worker.ack(leased[0])
    acked = await worker.ack_many(leased[:2])
    assert [(one.ok, one.status) for one in acked] == [
        (False, errors.Status.LEASE_EXPIRED), (True, 0)
    ]  # fmt: skip
    nacked = await worker.nack_many([leased[2], leased[3].delivery], reason="retry")
    assert [one.ok for one in nacked] == [True, True]
    again = await worker.pop_many(queue.id, 10, lease=30)
    assert [(m.text, m.deliveries, m.failure) for m in again] == [
        ("job 2", 2, "retry"), ("job 3", 2, "retry")
    ]  # fmt: skip
    await worker.send(queue.id, "plain")
    (plain,) = await worker.pop_many(queue.id, 1)
    with pytest.raises(errors.BadRequest, match="not taken with a lease"):
        await worker.ack_many([plain])


async def test_every_message_goes_to_exactly_one_of_32_batch_readers(
    servers: list[ServerProcess], unique: Unique
) -> None:
    queue_name = unique("shared")
    total = 3000
    producer_name = unique("producer")
    async with courier.AsyncClient.connect(address(servers[0])) as setup:
        await setup.register(producer_name)
    servers_list = ",".join(address(server) for server in servers)
    names = [unique("consumer") for _ in range(32)]
    for name in names:
        async with courier.AsyncClient.connect(address(servers[0])) as anonymous:
            await anonymous.register(name)

    async def consume(name: str, index: int) -> list[int]:
        server = address(servers[index % len(servers)])
        async with courier.AsyncClient.connect(server, name=name) as client:
            got: list[int] = []
            idle = 0
            while idle < 3:
                batch = await client.receive_many(queue_name, max_messages=25, timeout=0.3)
                idle = 0 if batch else idle + 1
                got += [int(message.body) for message in batch]
            return got

    async with courier.AsyncClient.connect(servers_list, name=producer_name) as producer:
        await producer.create_queue(queue_name)
        consumers = [asyncio.ensure_future(consume(name, k)) for k, name in enumerate(names)]
        for start in range(0, total, 250):
            await producer.send_many(queue_name, [str(k) for k in range(start, start + 250)])
        results = await asyncio.gather(*consumers)
    every = [number for got in results for number in got]
    assert sorted(every) == list(range(total))


async def test_a_cancelled_batch_read_gives_back_what_it_held(
    servers: list[ServerProcess], unique: Unique
) -> None:
    name = unique("impatient")
    async with courier.AsyncClient.connect(address(servers[0])) as anonymous:
        await anonymous.register(name)
    async with courier.AsyncClient.connect(address(servers[0]), name=name) as client:
        queue = await client.create_queue(unique("q"))
        waiting = asyncio.ensure_future(client.receive_many(
            queue.id, max_messages=10, timeout=30, min_messages=5, max_wait=30, lease=30
        ))  # fmt: skip
        await asyncio.sleep(0.2)
        await client.send_many(queue.id, ["one", "two"])
        await asyncio.sleep(0.5)  # the server holds both, waiting for three more
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        deadline = time.monotonic() + 5
        back: list[courier.Message] = []
        while len(back) < 2 and time.monotonic() < deadline:
            back += await client.pop_many(queue.id, 10)
            await asyncio.sleep(0.05)
        assert [message.text for message in back] == ["one", "two"]
