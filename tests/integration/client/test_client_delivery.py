"""Acknowledged delivery through real servers: leases, ack/nack/extend, redelivery when
a connection dies, cancel, delays, expiry, dedup and binary bodies."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import pytest
from client_harness import Connect, logged_in

import courier
from courier import errors
from helpers.names import Unique
from helpers.servers import ServerProcess, address

BODIES = [b"", b"nul\x00inside", b"\xff\xfe\x80 not UTF-8", bytes(range(256)), "é ü".encode()]


async def test_any_bytes_round_trip_exactly(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    client = await logged_in(connect, servers[0], unique("bytes"))
    queue = await client.create_queue(unique("q"))
    for body in BODIES:
        await client.send(queue.id, body)
    popped = [await client.pop(queue.id) for _ in BODIES]
    assert [message.body for message in popped] == BODIES
    await client.send(queue.id, "text is UTF-8")
    assert (await client.pop(queue.id)).body == b"text is UTF-8"


async def test_a_lease_hides_the_message_until_ack(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    worker = await logged_in(connect, servers[0], unique("worker"))
    other = await logged_in(connect, servers[1], unique("other"))
    queue = await worker.create_queue(unique("q"))
    (sent,) = await worker.send(queue.id, "job")

    taken = await worker.receive(queue.id, timeout=1, lease=30)
    assert (taken.id, taken.deliveries) == (sent, 1) and taken.delivery is not None
    assert await other.pop(queue.id) is None  # invisible to everyone meanwhile
    await worker.ack(taken)
    with pytest.raises(errors.LeaseExpired):
        await worker.ack(taken.delivery)
    with pytest.raises(errors.BadRequest):  # a plain pop has nothing to settle
        await worker.send(queue.id, "plain")
        await worker.ack(await worker.pop(queue.id))


async def test_an_unacknowledged_lease_runs_out_and_the_message_comes_again(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    first = await logged_in(connect, servers[0], unique("first"))
    second = await logged_in(connect, servers[1], unique("second"))
    queue = await first.create_queue(unique("q"))
    (sent,) = await first.send(queue.id, "retry me")
    lost = await first.pop(queue.id, lease=0.2)
    started = time.monotonic()
    again = await second.receive(queue.id, timeout=5, lease=30)
    assert time.monotonic() - started < 2  # woken by the sweep, not by polling
    assert (again.id, again.deliveries, again.failure) == (sent, 2, "lease expired")
    with pytest.raises(errors.LeaseExpired):
        await first.ack(lost)
    await second.ack(again)


async def test_nack_with_a_delay_and_extend(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    client = await logged_in(connect, servers[0], unique("nacker"))
    queue = await client.create_queue(unique("q"))
    await client.send(queue.id, "flaky")
    taken = await client.pop(queue.id, lease=0.3)
    await client.extend(taken, 30)
    await asyncio.sleep(0.5)
    assert await client.pop(queue.id) is None  # the extension holds it
    await client.nack(taken, delay=0.3, reason="downstream busy")
    assert await client.pop(queue.id) is None
    again = await client.receive(queue.id, timeout=5, lease=30)
    assert (again.body, again.deliveries, again.failure) == (b"flaky", 2, "downstream busy")


async def test_dead_letters_after_max_deliveries(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    client = await logged_in(connect, servers[0], unique("dlq"))
    queue = await client.create_queue(unique("q"))
    dead = await client.create_queue(unique("dead"))
    settings = await client.configure_queue(queue.name, max_deliveries=2, dead_letter_queue=dead)
    assert (settings.max_deliveries, settings.dead_letter_queue) == (2, dead.id)
    (sent,) = await client.send(queue.id, b"poison \x00")
    for attempt in range(2):
        taken = await client.pop(queue.id, lease=30)
        await client.nack(taken, reason=f"attempt {attempt}")
    assert await client.pop(queue.id) is None
    letter = await client.pop(dead.id)
    assert (letter.id, letter.body, letter.deliveries) == (sent, b"poison \x00", 2)
    assert (letter.dead_from, letter.failure) == (queue.id, "attempt 1")


async def test_a_dropped_connection_releases_its_leases_at_once(
    servers: list[ServerProcess], unique: Unique
) -> None:
    name = unique("doomed")
    async with courier.AsyncClient.connect(address(servers[0])) as anonymous:
        await anonymous.register(name)
    doomed = await courier.AsyncClient.connect(address(servers[0]), name=name)
    async with courier.AsyncClient.connect(address(servers[1])) as watcher:
        await watcher.register(watcher_name := unique("watcher"))
    async with courier.AsyncClient.connect(address(servers[1]), name=watcher_name) as watcher:
        queue = await doomed.create_queue(unique("q"))
        await doomed.send(queue.id, "in flight")
        await doomed.pop(queue.id, lease=60)
        # Abort the connection without a goodbye, as a killed process would.
        link = doomed._session._connection
        assert link is not None
        link._transport.abort()
        started = time.monotonic()
        again = await watcher.receive(queue.id, timeout=5, lease=30)
        assert time.monotonic() - started < 2
        assert (again.body, again.deliveries) == (b"in flight", 2)
    await doomed.close()


async def test_a_clean_close_keeps_leases_for_a_later_ack(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    name = unique("cli-like")
    first = await logged_in(connect, servers[0], name)
    queue = await first.create_queue(unique("q"))
    await first.send(queue.id, "ack me later")
    taken = await first.pop(queue.id, lease=60)
    await first.close()  # LOGOUT: the lease stays
    later = await connect(address(servers[1]), name=name)
    assert await later.pop(queue.id) is None
    await later.ack(taken.delivery)


async def test_cancelling_a_receive_takes_nothing(
    servers: list[ServerProcess], unique: Unique
) -> None:
    async with courier.AsyncClient.connect(address(servers[0])) as anonymous:
        await anonymous.register(name := unique("canceller"))
    async with courier.AsyncClient.connect(address(servers[0]), name=name) as client:
        queue = await client.create_queue(unique("q"))
        for lease in (None, 30.0):
            waiting = asyncio.create_task(client.receive(queue.id, timeout=30, lease=lease))
            await asyncio.sleep(0.2)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            await asyncio.sleep(0.2)  # CANCEL reaches the server
            await client.send(queue.id, "not for the cancelled wait")
            taken = await client.receive(queue.id, timeout=5)
            assert taken is not None and taken.text == "not for the cancelled wait"


async def test_a_delayed_message_wakes_a_waiting_receive_on_time(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    client = await logged_in(connect, servers[0], unique("patient"))
    queue = await client.create_queue(unique("q"))
    await client.send(queue.id, "in half a second", delay=0.5)
    await client.send(queue.id, "at a time", not_before=datetime.now(UTC) + timedelta(seconds=0.8))
    assert await client.pop(queue.id) is None
    started = time.monotonic()
    first = await client.receive(queue.id, timeout=5)
    second = await client.receive(queue.id, timeout=5)
    took = time.monotonic() - started
    assert (first.text, second.text) == ("in half a second", "at a time")
    assert 0.6 <= took < 1.8


async def test_a_message_past_its_ttl_is_gone(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    client = await logged_in(connect, servers[0], unique("ttl"))
    queue = await client.create_queue(unique("q"))
    await client.send(queue.id, "short-lived", ttl=0.2)
    await client.send(queue.id, "long-lived", ttl=60)
    await asyncio.sleep(0.6)
    assert (await client.pop(queue.id)).text == "long-lived"
    assert await client.pop(queue.id) is None


async def test_a_retried_send_with_a_dedup_id_is_stored_once(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    name = unique("retrier")
    first = await logged_in(connect, servers[0], name)
    queue = await first.create_queue(unique("q"))
    ids = await first.send(queue.id, "charge 10", dedup_id="charge-1")
    await first.close()
    retry = await connect(address(servers[1]), name=name)  # through another middleware
    assert await retry.send(queue.id, "charge 10", dedup_id="charge-1") == ids
    assert (await retry.get_queue(queue.id)).message_count == 1


async def test_bad_lease_and_delivery_arguments_are_refused_before_sending(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    client = await logged_in(connect, servers[0], unique("careful"))
    queue = await client.create_queue(unique("q"))
    for call in (
        client.pop(queue.id, lease=0),
        client.send(queue.id, "x", ttl=0),
        client.send(queue.id, "x", delay=-1),
        client.send(queue.id, "x", dedup_id=""),
        client.send(queue.id, "x", delay=1, not_before=datetime.now(UTC)),
        client.send(queue.id, 42),
        client.configure_queue(queue.id, max_deliveries=0),
        client.configure_queue(queue.id, max_messages=0),
        client.configure_queue(queue.id, max_bytes=-5),
        client.configure_queue(queue.id, overflow="sometimes"),
    ):
        with pytest.raises(errors.BadRequest):
            await call


async def test_queue_access_lists_through_both_clients(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    owner = await logged_in(connect, servers[0], unique("acl-owner"))
    other_name = unique("acl-other")
    other = await logged_in(connect, servers[0], other_name)
    queue = await owner.create_queue(unique("q"))
    assert (await owner.queue_acl(queue.id)).senders is None
    acl = await owner.set_queue_acl(queue.name, senders=[], readers=[other_name])
    assert (acl.senders, acl.readers) == ((), (other.client_id,))
    with pytest.raises(errors.NotAuthorised, match="send list"):
        await other.send(queue.id, "no")
    await owner.send(queue.id, "yes")
    assert (await other.pop(queue.id)).body == b"yes"
    assert (await owner.set_queue_acl(queue.id)).readers is None
