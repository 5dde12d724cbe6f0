"""Bad input, capacity and pipelining: one client's trouble is nobody else's."""

from __future__ import annotations

import asyncio
import random
import re
import time
from pathlib import Path

from server_harness import Connect, WireClient, log_in_new, raw_frame

from courier import models, protocol
from courier.errors import Status
from courier.protocol import frames
from helpers.servers import ServerProcess, StartServer

TIME = models.Order.TIME
PROTOCOL_DOC = Path(__file__).resolve().parents[3] / "docs" / "protocol.md"


async def expect_error_then_close(client: WireClient, request_id: int) -> frames.ErrorReply:
    raw, reply = await client.next_unsolicited()
    assert isinstance(reply, frames.ErrorReply)
    assert raw.request_id == request_id
    await client.wait_closed_by_server()
    return reply


async def test_unknown_opcode_and_malformed_body_keep_the_connection(
    server: ServerProcess, connect: Connect
) -> None:
    client = await connect(server)
    client.send_raw(raw_frame(0x7E, 41))
    raw, reply = await client.next_unsolicited()
    assert (raw.request_id, raw.opcode) == (41, 0x7E)
    assert isinstance(reply, frames.ErrorReply) and reply.status == Status.BAD_REQUEST
    # A REGISTER whose name length runs past the end of the body.
    client.send_raw(raw_frame(protocol.Opcode.REGISTER, 42, b"\x00\x09ab"))
    raw, reply = await client.next_unsolicited()
    assert (raw.request_id, raw.opcode) == (42, protocol.Opcode.REGISTER)
    assert isinstance(reply, frames.ErrorReply) and reply.status == Status.BAD_REQUEST
    assert isinstance(await client.ok(frames.Ping()), frames.Pong)


async def test_bad_version_gets_an_error_and_the_connection_closes(
    server: ServerProcess, connect: Connect
) -> None:
    client = await connect(server)
    client.send_raw(raw_frame(protocol.Opcode.PING, 5, version=9))
    reply = await expect_error_then_close(client, 0)
    assert reply.status == Status.BAD_REQUEST and "version" in reply.message


async def test_reply_frame_from_a_client_closes_the_connection(
    server: ServerProcess, connect: Connect
) -> None:
    client = await connect(server)
    client.send_raw(protocol.encode(7, frames.Pong(123)))
    reply = await expect_error_then_close(client, 7)
    assert reply.status == Status.BAD_REQUEST


async def test_oversize_body_is_refused_but_oversize_frame_closes(
    start_server: StartServer, connect: Connect
) -> None:
    server = await start_server(max_body_bytes=1000)
    client = await connect(server)
    await log_in_new(client, "big")
    queue = (await client.ok(frames.CreateQueue("q"))).queue  # type: ignore[union-attr]
    fits = frames.Send((queue.id,), "é".encode() * 500, None, 5, None)  # exactly 1000 bytes
    assert isinstance(await client.ok(fits), frames.MessageIdsReply)
    too_big = frames.Send((queue.id,), "é".encode() * 501, None, 5, None)
    assert await client.error(too_big) == Status.PAYLOAD_TOO_LARGE
    much_too_big = frames.Send((queue.id,), b"x" * 30_000, None, 5, None)
    assert await client.error(much_too_big) == Status.PAYLOAD_TOO_LARGE
    assert await client.ok(frames.GetQueue(queue.id, None)) == frames.QueueReply(
        models.Queue(queue.id, "q", 1)
    )
    # Far beyond any message or batch: the frame itself is refused and the stream is given up.
    client.send_raw(protocol.encode(99, frames.Send((queue.id,), b"x" * 5_000_000, None, 5, None)))
    reply = await expect_error_then_close(client, 0)
    assert reply.status == Status.BAD_REQUEST and "exceeds the limit" in reply.message


async def test_garbage_on_one_connection_leaves_other_clients_intact(
    server: ServerProcess, connect: Connect
) -> None:
    good = await connect(server)
    await log_in_new(good, "good")
    queue = (await good.ok(frames.CreateQueue("safe"))).queue  # type: ignore[union-attr]
    rng = random.Random(1234)
    sent_bodies = []
    for round_ in range(20):
        garbage = await connect(server)
        noise = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 4000)))
        if round_ % 2:
            noise = bytes([protocol.VERSION]) + noise  # get past the version check sometimes
        garbage.send_raw(noise)
        body = f"message {round_}"
        await good.ok(frames.Send((queue.id,), body.encode(), None, 5, None))
        sent_bodies.append(body)
    assert isinstance(await good.ok(frames.Ping()), frames.Pong)
    received = []
    for _ in sent_bodies:
        reply = await good.ok(frames.Read(queue.id, None, TIME, pop=True))
        assert isinstance(reply, frames.MessageReply)
        received.append(reply.message.text)
    assert received == sent_bodies


async def test_capacity_limit(start_server: StartServer, connect: Connect) -> None:
    server = await start_server(max_clients=2)
    first, second, third = [await connect(server) for _ in range(3)]
    for n, client in enumerate((first, second)):
        await log_in_new(client, f"in{n}")
    late = await third.ok(frames.Register("late", models.ClientMode.READ_WRITE))
    assert isinstance(late, frames.ClientReply)
    assert await third.error(frames.Login(client_id=late.client.id, name=None)) == (
        Status.SERVER_FULL
    )
    # The refused connection stays open, the two logged in are unaffected, and a
    # place freed by a LOGOUT lets the newcomer in.
    assert isinstance(await second.ok(frames.Ping()), frames.Pong)
    assert isinstance(await first.ok(frames.Logout()), frames.Done)
    logged_in = await third.ok(frames.Login(client_id=late.client.id, name=None))
    assert isinstance(logged_in, frames.ClientReply)


async def test_idle_connections_that_never_log_in_cannot_lock_anyone_out(
    start_server: StartServer, connect: Connect
) -> None:
    server = await start_server(max_anonymous=3, max_clients=2)
    idle = [await connect(server) for _ in range(3)]
    assert isinstance(await idle[0].ok(frames.Ping()), frames.Pong)
    newcomer = await connect(server)  # the fourth pushes out the oldest idle one
    reply = await expect_error_then_close(idle[0], 0)
    assert reply.status == Status.SERVER_FULL and "not logged in" in reply.message
    await log_in_new(newcomer, "newcomer")
    assert isinstance(await idle[1].ok(frames.Ping()), frames.Pong)  # the others stay
    # Once logged in, a connection is never pushed out by idle ones.
    for _ in range(5):
        await connect(server)
    assert isinstance(await newcomer.ok(frames.Ping()), frames.Pong)


async def test_a_connection_that_does_not_log_in_in_time_is_closed(
    start_server: StartServer, connect: Connect
) -> None:
    server = await start_server(login_timeout=0.5)
    idle, busy = await connect(server), await connect(server)
    started = time.monotonic()
    await log_in_new(busy, "busy")
    reply = await expect_error_then_close(idle, 0)
    assert reply.status == Status.BAD_REQUEST and "no LOGIN within 0.5s" in reply.message
    assert 0.4 < time.monotonic() - started < 3
    await asyncio.sleep(0.3)
    assert isinstance(await busy.ok(frames.Ping()), frames.Pong)  # logged in: no deadline
    assert isinstance(await busy.ok(frames.Logout()), frames.Done)
    reply = await expect_error_then_close(busy, 0)  # anonymous again: the clock runs again
    assert "no LOGIN" in reply.message


async def test_a_thousand_pipelined_requests(server: ServerProcess, connect: Connect) -> None:
    client = await connect(server)
    await log_in_new(client, "piper")
    queue = (await client.ok(frames.CreateQueue("pipe"))).queue  # type: ignore[union-attr]
    requests: list[frames.Request] = []
    for n in range(1000):
        if n % 2:
            requests.append(frames.CreateQueue(f"queue-{n}"))
        else:
            requests.append(frames.Send((queue.id,), f"body-{n}".encode(), None, 1 + n % 10, None))
    futures = [client.submit(request) for request in requests]  # all in flight at once
    replies = await asyncio.wait_for(asyncio.gather(*futures), 60)
    message_ids = set()
    for request, reply in zip(requests, replies, strict=True):
        if isinstance(request, frames.CreateQueue):
            assert isinstance(reply, frames.QueueReply) and reply.queue.name == request.name
        else:
            assert isinstance(reply, frames.MessageIdsReply) and len(reply.ids) == 1
            message_ids.add(reply.ids[0])
    assert len(message_ids) == 500
    pops = [client.submit(frames.Read(queue.id, None, TIME, pop=True)) for _ in range(500)]
    popped = await asyncio.wait_for(asyncio.gather(*pops), 60)
    bodies = {reply.message.text for reply in popped if isinstance(reply, frames.MessageReply)}
    assert bodies == {f"body-{n}" for n in range(0, 1000, 2)}


async def test_the_frame_limit_is_the_one_docs_protocol_md_states(
    server: ServerProcess, connect: Connect
) -> None:
    """The running server (default body limit) names its limit when a frame passes
    it; that is the figure in the document, and a frame of exactly that size is still
    taken as a frame."""
    documented = re.search(r"\*\*([\d,]+) bytes\*\* with the default", PROTOCOL_DOC.read_text())
    assert documented is not None
    limit = int(documented.group(1).replace(",", ""))

    at_limit = await connect(server)
    at_limit.send_raw(raw_frame(frames.OPCODES[frames.Ping], 7, bytes(limit - 12)))
    raw, reply = await at_limit.next_unsolicited()
    assert raw.request_id == 7 and isinstance(reply, frames.ErrorReply)
    assert reply.status == Status.BAD_REQUEST and "exceeds" not in reply.message
    assert isinstance(await at_limit.ok(frames.Ping()), frames.Pong)  # still open

    over = await connect(server)
    over.send_raw(protocol.constants.HEADER.pack(protocol.VERSION, 0x20, 0, 8, limit - 11))
    reply = await expect_error_then_close(over, 0)
    told = re.search(r"exceeds the limit of (\d+) bytes", reply.message)
    assert told is not None and int(told.group(1)) == limit


async def test_a_thousand_idle_sockets_do_not_stop_a_client_from_logging_in(
    server: ServerProcess, connect: Connect
) -> None:
    idle = []
    try:
        for _ in range(1000):
            idle.append(await asyncio.open_connection(*server.address))
        client = await connect(server)
        await log_in_new(client, "among-the-idle")
        assert isinstance(await client.ok(frames.Ping()), frames.Pong)
    finally:
        for _, writer in idle:
            writer.close()


async def test_each_limit_gives_its_typed_error(
    start_server: StartServer, connect: Connect
) -> None:
    server = await start_server(
        max_queues_per_send=3, max_wait=2, max_waits_per_connection=2, max_queues_per_client=4
    )
    client = await connect(server)
    await log_in_new(client, "limited")
    queues = []
    for n in range(4):
        created = await client.ok(frames.CreateQueue(f"limited{n}"))
        assert isinstance(created, frames.QueueReply)
        queues.append(created.queue.id)
    fifth = await client.call(frames.CreateQueue("limited4"))
    assert isinstance(fifth, frames.ErrorReply) and fifth.status == Status.QUOTA_EXCEEDED
    assert "created 4 queues" in fifth.message
    other = await connect(server)  # the quota is per client: another may still create
    await log_in_new(other, "unlimited")
    assert isinstance(await other.ok(frames.CreateQueue("limited4")), frames.QueueReply)
    await client.ok(frames.DeleteQueue(queues.pop(), False))  # deleting one frees a place
    small = await client.ok(frames.ConfigureQueue(queues[0], None, None, False, max_messages=1))
    assert isinstance(small, frames.QueueSettingsReply) and small.settings.max_messages == 1
    await client.ok(frames.Send((queues[0],), b"fits", None, 5, None))
    full = await client.call(frames.Send((queues[0],), b"does not", None, 5, None))
    assert isinstance(full, frames.ErrorReply) and full.status == Status.QUOTA_EXCEEDED
    await client.ok(frames.Read(queues[0], None, TIME, pop=True))  # room again
    queues.append((await client.ok(frames.CreateQueue("limited5"))).queue.id)  # type: ignore[union-attr]
    to_three = await client.ok(frames.Send(tuple(queues[:3]), b"x", None, 5, None))
    assert isinstance(to_three, frames.MessageIdsReply) and len(to_three.ids) == 3
    too_many = await client.call(frames.Send(tuple(queues), b"x", None, 5, None))
    assert isinstance(too_many, frames.ErrorReply) and too_many.status == Status.BAD_REQUEST
    assert "at most 3 queues; this one names 4" in too_many.message

    too_long = await client.call(frames.Receive(queues[3], None, TIME, 2001))
    assert isinstance(too_long, frames.ErrorReply) and "a wait is at most 2s" in too_long.message

    waiting = [asyncio.create_task(client.call(frames.Receive(queues[3], None, TIME, 1500)))
               for _ in range(2)]  # fmt: skip
    await asyncio.sleep(0.3)
    third = await client.call(frames.Receive(queues[3], None, TIME, 1500))
    assert isinstance(third, frames.ErrorReply) and third.status == Status.BAD_REQUEST
    assert "at most 2 requests waiting" in third.message
    # The refused send stored nothing in the fourth queue: the two waits end empty.
    for ended in await asyncio.gather(*waiting):
        assert isinstance(ended, frames.ErrorReply) and ended.status == Status.QUEUE_EMPTY
    again = await client.call(frames.Receive(queues[3], None, TIME, 100))  # a place is free
    assert isinstance(again, frames.ErrorReply) and again.status == Status.QUEUE_EMPTY
