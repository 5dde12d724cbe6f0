"""RECEIVE and AWAIT_RESPONSE wait on the server and are woken by NOTIFY, not polling."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import asyncpg
from server_harness import Connect, WireClient, log_in_new

from courier import models
from courier.db import listen
from courier.errors import Status
from courier.protocol import frames
from helpers.servers import ServerProcess, StartServer

TIME = models.Order.TIME
LONG_MS = 20_000


async def two_servers(
    start_server: StartServer, connect: Connect
) -> tuple[WireClient, WireClient, models.ClientInfo, models.Queue]:
    """A reader on server A, a writer on server B, and a shared queue."""
    server_a, server_b = await start_server(), await start_server()
    reader, writer = await connect(server_a), await connect(server_b)
    reader_info = await log_in_new(reader, "reader")
    await log_in_new(writer, "writer")
    queue = (await writer.ok(frames.CreateQueue("inbox"))).queue  # type: ignore[union-attr]
    return reader, writer, reader_info, queue


async def woken_by_a_send(
    writer: WireClient, queue_id: int, body: bytes, waiting: asyncio.Future[frames.Reply]
) -> float:
    """Send ``body``: the waiting receive must get it. Returns the seconds that took."""
    started = time.monotonic()
    await writer.ok(frames.Send((queue_id,), body, None, 5, None))
    reply = await asyncio.wait_for(waiting, LONG_MS / 1000)
    assert isinstance(reply, frames.MessageReply) and reply.message.body == body
    return time.monotonic() - started


async def test_receive_on_one_server_is_woken_by_a_send_through_another(
    start_server: StartServer, connect: Connect
) -> None:
    reader, writer, _, queue = await two_servers(start_server, connect)
    waiting = reader.submit(frames.Receive(queue.id, None, TIME, timeout_ms=LONG_MS))
    await asyncio.sleep(0.3)  # let the receive reach its wait
    assert not waiting.done()
    assert await woken_by_a_send(writer, queue.id, b"wake up", waiting) < LONG_MS / 1000 / 4
    # The message was popped, not peeked.
    assert await reader.error(frames.Read(queue.id, None, TIME, pop=False)) == Status.QUEUE_EMPTY


async def test_await_response_is_woken_only_by_its_context(
    start_server: StartServer, connect: Connect
) -> None:
    reader, writer, reader_info, queue = await two_servers(start_server, connect)
    waiting = reader.submit(frames.AwaitResponse(queue.id, context=7, timeout_ms=LONG_MS))
    await asyncio.sleep(0.3)
    await writer.ok(frames.Send((queue.id,), b"not yours", None, 5, 7))  # broadcast
    await writer.ok(frames.Send((queue.id,), b"wrong context", reader_info.id, 5, 8))
    await asyncio.sleep(0.3)
    assert not waiting.done()
    await writer.ok(frames.Send((queue.id,), b"answer", reader_info.id, 5, 7))
    reply = await asyncio.wait_for(waiting, LONG_MS / 1000)
    assert isinstance(reply, frames.MessageReply) and reply.message.text == "answer"


async def test_receive_times_out_with_queue_empty(server: ServerProcess, connect: Connect) -> None:
    client = await connect(server)
    await log_in_new(client, "patient")
    queue = (await client.ok(frames.CreateQueue("quiet"))).queue  # type: ignore[union-attr]
    started = time.monotonic()
    status = await client.error(frames.Receive(queue.id, None, TIME, timeout_ms=500))
    elapsed = time.monotonic() - started
    assert status == Status.QUEUE_EMPTY
    assert 0.45 <= elapsed < 3.0
    started = time.monotonic()
    assert await client.error(frames.AwaitResponse(queue.id, 1, timeout_ms=300)) == (
        Status.NO_MESSAGE
    )
    assert 0.25 <= time.monotonic() - started < 3.0


async def test_many_waiters_each_get_one_message(server: ServerProcess, connect: Connect) -> None:
    writer = await connect(server)
    await log_in_new(writer, "writer")
    queue = (await writer.ok(frames.CreateQueue("fanout"))).queue  # type: ignore[union-attr]
    readers = [await connect(server) for _ in range(5)]
    for n, reader in enumerate(readers):
        await log_in_new(reader, f"reader-{n}")
    waits = [r.submit(frames.Receive(queue.id, None, TIME, LONG_MS)) for r in readers]
    await asyncio.sleep(0.3)
    for n in range(5):
        await writer.ok(frames.Send((queue.id,), f"m{n}".encode(), None, 5, None))
    replies = await asyncio.wait_for(asyncio.gather(*waits), LONG_MS / 1000)
    bodies = sorted(r.message.text for r in replies if isinstance(r, frames.MessageReply))
    assert bodies == [f"m{n}" for n in range(5)]


async def test_a_message_one_waiter_cannot_take_reaches_the_next(
    start_server: StartServer, connect: Connect
) -> None:
    # The older waiter reads only what its own client sent; a message from the writer
    # wakes it first (one message wakes one waiter), and it must hand the wake-up on.
    server = await start_server()
    reader, second, writer = await connect(server), await connect(server), await connect(server)
    reader_info = await log_in_new(reader, "choosy")
    await log_in_new(second, "second")
    await log_in_new(writer, "writer")
    queue = (await writer.ok(frames.CreateQueue("shared"))).queue  # type: ignore[union-attr]
    choosy = reader.submit(frames.Receive(queue.id, reader_info.id, TIME, timeout_ms=LONG_MS))
    await asyncio.sleep(0.3)
    anyone = second.submit(frames.Receive(queue.id, None, TIME, timeout_ms=LONG_MS))
    await asyncio.sleep(0.3)
    # Woken, not left to its timeout:
    assert await woken_by_a_send(writer, queue.id, b"for anyone", anyone) < 2
    assert not choosy.done()


async def test_a_waiting_receive_ends_with_its_connection(
    server: ServerProcess, connect: Connect
) -> None:
    leaver, writer = await connect(server), await connect(server)
    await log_in_new(leaver, "leaver")
    await log_in_new(writer, "writer")
    queue = (await writer.ok(frames.CreateQueue("q"))).queue  # type: ignore[union-attr]
    leaver.submit(frames.Receive(queue.id, None, TIME, timeout_ms=LONG_MS))
    await asyncio.sleep(0.3)
    await leaver.close()
    await asyncio.sleep(0.3)
    await writer.ok(frames.Send((queue.id,), b"still here", None, 5, None))
    await asyncio.sleep(0.3)
    # Nobody took it on behalf of the departed client.
    peek = await writer.ok(frames.Read(queue.id, None, TIME, pop=False))
    assert isinstance(peek, frames.MessageReply) and peek.message.text == "still here"


async def a_receive_waiting(
    server: ServerProcess, connect: Connect
) -> tuple[WireClient, WireClient, models.Queue, asyncio.Future[frames.Reply]]:
    """A reader and a writer logged in, a queue, and the reader's RECEIVE on it
    waiting (for LONG_MS)."""
    reader, writer = await connect(server), await connect(server)
    await log_in_new(reader, "reader")
    await log_in_new(writer, "writer")
    queue = (await writer.ok(frames.CreateQueue("q"))).queue  # type: ignore[union-attr]
    waiting = reader.submit(frames.Receive(queue.id, None, TIME, timeout_ms=LONG_MS))
    await asyncio.sleep(0.3)
    return reader, writer, queue, waiting


async def test_waiters_recover_when_the_listen_connection_drops(
    dsn: str, server: ServerProcess, connect: Connect
) -> None:
    reader, writer, queue, waiting = await a_receive_waiting(server, connect)
    admin = await asyncpg.connect(dsn)
    try:
        killed = await admin.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database()"
            f" AND application_name = '{listen.APPLICATION_NAME}'"
        )
    finally:
        await admin.close()
    assert killed == 1
    await writer.ok(frames.Send((queue.id,), b"after the drop", None, 5, None))
    reply = await asyncio.wait_for(waiting, LONG_MS / 1000)
    assert isinstance(reply, frames.MessageReply) and reply.message.text == "after the drop"
    # And new waits are woken by notifications again.
    waiting = reader.submit(frames.Receive(queue.id, None, TIME, timeout_ms=LONG_MS))
    await asyncio.sleep(0.5)
    assert await woken_by_a_send(writer, queue.id, b"second", waiting) < LONG_MS / 1000 / 4


async def test_waiters_recover_when_the_listen_connection_goes_silent(
    dsn: str, start_server: StartServer, connect: Connect
) -> None:
    """The LISTEN backend is stopped (SIGSTOP): its connection stays open, but no
    notification comes through and nothing says so. The link's check notices within
    about two check intervals, reconnects, and the waiting receive looks again."""
    server = await start_server(notify_check=0.5)
    _, writer, queue, waiting = await a_receive_waiting(server, connect)
    admin = await asyncpg.connect(dsn)
    try:
        pid = await admin.fetchval(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name = $1",
            listen.APPLICATION_NAME,
        )
        os.kill(pid, signal.SIGSTOP)
        try:
            body = b"while the link is silent"
            # Long before the receive's own timeout:
            assert await woken_by_a_send(writer, queue.id, body, waiting) < 5
        finally:
            os.kill(pid, signal.SIGCONT)
    finally:
        await admin.close()
