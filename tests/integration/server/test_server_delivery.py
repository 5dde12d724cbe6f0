"""Leases, CANCEL and queue settings at the wire: what a server answers, frame by frame."""

from __future__ import annotations

import asyncio

from server_harness import Connect, WireClient, log_in_new

from courier import models
from courier.errors import Status
from courier.protocol import frames
from helpers.servers import ServerProcess

TIME = models.Order.TIME


async def queue_with_message(client: WireClient, body: bytes = b"work") -> models.Queue:
    queue = (await client.ok(frames.CreateQueue("jobs"))).queue  # type: ignore[union-attr]
    await client.ok(frames.Send((queue.id,), body, None, 5, None))
    return queue


async def test_a_leased_pop_answers_with_its_delivery_and_ack_settles_it(
    server: ServerProcess, connect: Connect
) -> None:
    client = await connect(server)
    await log_in_new(client, "worker")
    queue = await queue_with_message(client, b"\x00binary\xff")
    reply = await client.ok(frames.Read(queue.id, None, TIME, pop=True, lease_ms=30_000))
    assert isinstance(reply, frames.MessageReply)
    message = reply.message
    assert (message.body, message.deliveries) == (b"\x00binary\xff", 1)
    assert message.delivery is not None
    assert await client.error(frames.Read(queue.id, None, TIME, pop=True)) == Status.QUEUE_EMPTY
    assert isinstance(await client.ok(frames.Extend(message.delivery, 60_000)), frames.Done)
    assert isinstance(await client.ok(frames.Ack(message.delivery)), frames.Done)
    for late in (frames.Ack(message.delivery), frames.Nack(message.delivery), frames.Extend(1, 1)):
        assert await client.error(late) == Status.LEASE_EXPIRED


async def test_bad_lease_requests_are_refused_and_change_nothing(
    server: ServerProcess, connect: Connect
) -> None:
    client = await connect(server)
    await log_in_new(client, "careful")
    queue = await queue_with_message(client)
    peek = frames.Read(queue.id, None, TIME, pop=False, lease_ms=1000)
    assert await client.error(peek) == Status.BAD_REQUEST
    assert await client.error(frames.Extend(1, 0)) == Status.BAD_REQUEST
    missing = frames.ConfigureQueue(999_999, 3, None, False)
    assert await client.error(missing) == Status.QUEUE_NOT_FOUND
    itself = frames.ConfigureQueue(queue.id, 3, queue.id, False)
    assert await client.error(itself) == Status.BAD_REQUEST
    reply = await client.ok(frames.Read(queue.id, None, TIME, pop=True))
    assert isinstance(reply, frames.MessageReply) and reply.message.body == b"work"


async def test_a_connection_that_drops_gives_its_leases_back(
    server: ServerProcess, connect: Connect
) -> None:
    holder, other = await connect(server), await connect(server)
    await log_in_new(holder, "holder")
    await log_in_new(other, "other")
    queue = await queue_with_message(holder)
    await holder.ok(frames.Receive(queue.id, None, TIME, timeout_ms=1000, lease_ms=60_000))
    holder.writer.transport.abort()  # no LOGOUT: the peer simply vanishes
    reply = await other.ok(frames.Receive(queue.id, None, TIME, timeout_ms=5000, lease_ms=1000))
    assert isinstance(reply, frames.MessageReply)
    assert (reply.message.deliveries, reply.message.failure) == (2, "the connection closed")


async def test_cancel_ends_a_waiting_receive_which_then_takes_nothing(
    server: ServerProcess, connect: Connect
) -> None:
    client, sender = await connect(server), await connect(server)
    await log_in_new(client, "waiter")
    await log_in_new(sender, "sender")
    queue = (await sender.ok(frames.CreateQueue("inbox"))).queue  # type: ignore[union-attr]
    waiting = client.submit(frames.Receive(queue.id, None, TIME, timeout_ms=30_000))
    await asyncio.sleep(0.3)
    waiting_id = max(client.pending)  # the RECEIVE's request id
    assert isinstance(await client.ok(frames.Cancel(waiting_id)), frames.Done)
    ended = await asyncio.wait_for(waiting, 5)
    assert isinstance(ended, frames.ErrorReply) and ended.status == Status.QUEUE_EMPTY
    await sender.ok(frames.Send((queue.id,), b"for whoever waits next", None, 5, None))
    reply = await sender.ok(frames.Read(queue.id, None, TIME, pop=True))
    assert isinstance(reply, frames.MessageReply)
    # Cancelling what is no longer waiting is harmless.
    assert isinstance(await client.ok(frames.Cancel(waiting_id)), frames.Done)


async def test_configure_queue_answers_with_the_settings_it_stored(
    server: ServerProcess, connect: Connect
) -> None:
    client = await connect(server)
    await log_in_new(client, "admin")
    queue = (await client.ok(frames.CreateQueue("work"))).queue  # type: ignore[union-attr]
    dead = (await client.ok(frames.CreateQueue("dead"))).queue  # type: ignore[union-attr]
    reply = await client.ok(frames.ConfigureQueue(queue.id, 4, dead.id, True))
    assert reply == frames.QueueSettingsReply(models.QueueSettings(queue.id, 4, dead.id, True))
    cleared = await client.ok(frames.ConfigureQueue(queue.id, None, None, False))
    assert cleared == frames.QueueSettingsReply(models.QueueSettings(queue.id))
