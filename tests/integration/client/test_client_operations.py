"""Every client operation against real servers, through AsyncClient and Client alike."""

from __future__ import annotations

import asyncio
import time

import pytest
from client_harness import Connect, logged_in, register

from courier import errors, models
from helpers.names import Unique
from helpers.servers import ServerProcess, address, addresses


async def test_register_then_log_in_by_name_or_id(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    anonymous = await connect(address(servers[0]))
    assert anonymous.client_id is None
    name, watcher = unique("alice"), unique("watcher")
    info = await anonymous.register(name)
    assert (info.name, info.mode) == (name, models.ClientMode.READ_WRITE)
    read_only = await anonymous.register(watcher, "read_only")
    assert read_only.mode is models.ClientMode.READ_ONLY and read_only.id != info.id

    by_name = await connect(addresses(servers), name=name)
    assert (by_name.client_id, by_name.name) == (info.id, name)
    await by_name.close()
    by_id = await connect(addresses(servers), client_id=read_only.id)
    assert (by_id.client_id, by_id.name) == (read_only.id, watcher)


async def test_queue_lifecycle(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    client = await logged_in(connect, servers[0], unique("owner"))
    name = unique("jobs")
    created = await client.create_queue(name)
    assert (created.name, created.message_count) == (name, 0)
    assert await client.get_queue(name) == created
    assert await client.get_queue(created.id) == created

    await client.send(name, "one")
    await client.send(created, "two")
    listed = {queue.id: queue for queue in await client.list_queues()}
    assert listed[created.id].message_count == 2
    assert (await client.get_queue(name)).message_count == 2

    await client.delete_queue(name)
    assert created.id not in {queue.id for queue in await client.list_queues()}
    with pytest.raises(errors.QueueNotFound):
        await client.get_queue(created.id)


async def test_send_to_several_queues_named_every_way(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    client = await logged_in(connect, servers[0], unique("fan"))
    by_name, by_id, by_value = [await client.create_queue(unique("q")) for _ in range(3)]
    ids = await client.send([by_name.name, by_id.id, by_value], "copy")
    assert len(set(ids)) == 3
    for queue, message_id in zip((by_name, by_id, by_value), ids, strict=True):
        message = await client.pop(queue.id)
        assert (message.id, message.queue, message.text) == (message_id, queue.id, "copy")
        assert message.sender == client.client_id


async def test_peek_leaves_the_message_pop_takes_it(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    client = await logged_in(connect, servers[0], unique("reader"))
    queue = await client.create_queue(unique("q"))
    (sent,) = await client.send(queue.name, "hello", priority=7, context=42)
    first, again = await client.peek(queue.name), await client.peek(queue.name)
    assert first == again
    assert (first.id, first.text, first.priority, first.context) == (sent, "hello", 7, 42)
    assert (first.receiver, first.sender) == (None, client.client_id)
    assert await client.pop(queue.name) == first
    assert await client.pop(queue.name) is None
    assert await client.peek(queue.name) is None


async def test_time_and_priority_order(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    client = await logged_in(connect, servers[0], unique("orderly"))
    queue = await client.create_queue(unique("q"))
    for priority in (3, 9, 5, 9):
        await client.send(queue.id, f"p{priority}", priority=priority)
    assert (await client.peek(queue.id)).text == "p3"  # oldest first
    popped = [(await client.pop(queue.id, order="priority")).priority for _ in range(4)]
    assert popped == [9, 9, 5, 3]


async def test_receiver_and_sender_decide_who_reads(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    alice = await logged_in(connect, servers[0], unique("alice"))
    bob = await logged_in(connect, servers[0], unique("bob"))
    carol = await logged_in(connect, servers[0], unique("carol"))
    queue = await alice.create_queue(unique("q"))
    await alice.send(queue.id, "for bob", receiver=bob.client_id)
    await carol.send(queue.id, "from carol")

    assert (await carol.peek(queue.id, sender=alice.client_id)) is None  # not for carol
    assert (await bob.peek(sender=alice.client_id)).text == "for bob"  # any queue
    assert (await bob.pop(queue.id, sender=carol.client_id)).text == "from carol"
    assert (await bob.pop(queue.id)).text == "for bob"
    assert await bob.pop(queue.id) is None


async def test_queues_for_me_counts_what_i_may_read(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    alice = await logged_in(connect, servers[0], unique("alice"))
    bob = await logged_in(connect, servers[0], unique("bob"))
    first, second, elsewhere = [await alice.create_queue(unique("q")) for _ in range(3)]
    await alice.send([first, second], "to anyone")
    await alice.send(second, "to bob", receiver=bob.client_id)
    await alice.send(elsewhere, "to alice", receiver=alice.client_id)
    counts = {queue.id: queue.message_count for queue in await bob.queues_for_me()}
    assert counts.get(first.id) == 1 and counts.get(second.id) == 2
    assert elsewhere.id not in counts


async def test_receive_waits_for_a_message_or_times_out(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    waiter = await logged_in(connect, servers[0], unique("waiter"))
    sender = await logged_in(connect, servers[1], unique("s"))
    queue = await waiter.create_queue(unique("q"))

    started = time.monotonic()
    assert await waiter.receive(queue.name, timeout=0.3) is None
    assert time.monotonic() - started >= 0.29

    async def send_later() -> None:
        await asyncio.sleep(0.3)
        await sender.send(queue.id, "late")

    received, _ = await asyncio.gather(waiter.receive(queue.name, timeout=10), send_later())
    assert received.text == "late" and received.sender == sender.client_id


async def test_ping_and_clock_offset(connect: Connect, servers: list[ServerProcess]) -> None:
    client = await connect(address(servers[0]))
    round_trip = await client.ping()
    assert 0 < round_trip < 1.0
    offset_ns, uncertainty_ns = await client.clock_offset()
    # One machine, one clock: the estimate must contain zero, give or take a millisecond.
    assert 0 < uncertainty_ns < 100_000_000
    assert abs(offset_ns) <= uncertainty_ns + 1_000_000


async def test_a_stale_cached_name_is_looked_up_again(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    alice = await logged_in(connect, servers[0], unique("alice"))
    bob = await logged_in(connect, servers[0], unique("bob"))
    name = unique("q")
    old = await bob.create_queue(name)  # bob's: only he (or an admin) may delete it
    await alice.send(name, "first")  # alice now caches name -> old.id
    await bob.delete_queue(name)
    new = await bob.create_queue(name)
    assert new.id != old.id
    await alice.send(name, "second")
    assert (await bob.pop(new.id)).text == "second"


async def test_close_logs_out_so_the_name_is_free_at_once(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    name = unique("again")
    await register(address(servers[0]), name)
    for _ in range(3):
        client = await connect(addresses(servers), name=name)
        assert client.name == name
        await client.close()
    with pytest.raises(errors.ConnectionLost, match="closed"):
        await client.ping()
