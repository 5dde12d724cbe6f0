"""A connection is a session: the pre-login rule, identity, read-only clients, release."""

from __future__ import annotations

import asyncio

import asyncpg
from server_harness import Connect, WireClient, log_in_new, log_in_once_released

from courier import models
from courier.errors import Status
from courier.protocol import frames
from helpers.servers import ServerProcess, StartServer

NEEDS_LOGIN: list[frames.Request] = [
    frames.Logout(),
    frames.CreateQueue("q"),
    frames.DeleteQueue(1, if_empty=False),
    frames.GetQueue(1, None),
    frames.GetClient(1, None),
    frames.GetClient(None, "late"),
    frames.ListQueues(),
    frames.Send((1,), b"x", None, 5, None),
    frames.Read(1, None, models.Order.TIME, pop=False),
    frames.Receive(1, None, models.Order.TIME, timeout_ms=0),
    frames.AwaitResponse(1, 1, timeout_ms=0),
    frames.QueuesForMe(),
]


async def test_only_ping_register_login_before_login(
    server: ServerProcess, connect: Connect
) -> None:
    client = await connect(server)
    for request in NEEDS_LOGIN:
        assert await client.error(request) == Status.NOT_LOGGED_IN, request
    # The connection is still usable, and the pre-login requests work.
    assert isinstance(await client.ok(frames.Ping()), frames.Pong)
    await log_in_new(client, "late")
    assert isinstance(await client.ok(frames.ListQueues()), frames.QueueListReply)


async def test_the_sender_is_the_logged_in_client(server: ServerProcess, connect: Connect) -> None:
    writer_conn, reader_conn = await connect(server), await connect(server)
    writer = await log_in_new(writer_conn, "writer")
    await log_in_new(reader_conn, "reader")
    queue = (await writer_conn.ok(frames.CreateQueue("q"))).queue  # type: ignore[union-attr]
    await writer_conn.ok(frames.Send((queue.id,), b"signed", None, 5, None))
    got = await reader_conn.ok(frames.Read(queue.id, None, models.Order.TIME, pop=True))
    assert isinstance(got, frames.MessageReply) and got.message.sender == writer.id


async def test_read_only_client_may_read_but_not_send(
    server: ServerProcess, connect: Connect
) -> None:
    writer_conn, reader_conn = await connect(server), await connect(server)
    await log_in_new(writer_conn, "writer")
    await log_in_new(reader_conn, "watcher", models.ClientMode.READ_ONLY)
    queue = (await writer_conn.ok(frames.CreateQueue("q"))).queue  # type: ignore[union-attr]
    await writer_conn.ok(frames.Send((queue.id,), b"for anyone", None, 5, None))

    refused = frames.Send((queue.id,), b"from a reader", None, 5, None)
    assert await reader_conn.error(refused) == Status.NOT_AUTHORISED
    got = await reader_conn.ok(frames.Read(queue.id, None, models.Order.TIME, pop=True))
    assert isinstance(got, frames.MessageReply) and got.message.text == "for anyone"
    assert await writer_conn.ok(frames.GetQueue(queue.id, None)) == frames.QueueReply(
        models.Queue(queue.id, "q", 0)
    )


async def test_login_twice_on_one_connection_is_refused(
    server: ServerProcess, connect: Connect
) -> None:
    client = await connect(server)
    first = await log_in_new(client, "first")
    await client.ok(frames.Register("second", models.ClientMode.READ_WRITE))
    assert await client.error(frames.Login(None, "second")) == Status.BAD_REQUEST
    # Logging out and in again switches identity.
    await client.ok(frames.Logout())
    switched = await client.ok(frames.Login(None, "second"))
    assert isinstance(switched, frames.ClientReply) and switched.client.id != first.id
    assert isinstance(await client.ok(frames.Logout()), frames.Done)
    assert await client.error(frames.Logout()) == Status.NOT_LOGGED_IN


async def test_pipelined_requests_see_the_session_of_their_position(
    server: ServerProcess, connect: Connect
) -> None:
    setup = await connect(server)
    await setup.ok(frames.Register("piper", models.ClientMode.READ_WRITE))
    client = await connect(server)
    # Sent back to back, without waiting: before, login, after, logout, after that.
    before = client.submit(frames.ListQueues())
    login = client.submit(frames.Login(None, "piper"))
    during = [client.submit(frames.CreateQueue(f"q{n}")) for n in range(20)]
    logout = client.submit(frames.Logout())
    after = client.submit(frames.ListQueues())
    replies = await asyncio.gather(before, login, *during, logout, after)
    assert isinstance(replies[0], frames.ErrorReply) and replies[0].status == Status.NOT_LOGGED_IN
    assert isinstance(replies[1], frames.ClientReply)
    assert all(isinstance(reply, frames.QueueReply) for reply in replies[2:-2])
    assert isinstance(replies[-2], frames.Done)
    assert isinstance(replies[-1], frames.ErrorReply) and replies[-1].status == Status.NOT_LOGGED_IN


async def test_disconnect_releases_the_session(server: ServerProcess, connect: Connect) -> None:
    first = await connect(server)
    client = await log_in_new(first, "roamer")
    await first.close()
    second = await connect(server)
    again = frames.Login(client.id, None)
    # The server logs the client out once it sees the connection close.
    for _ in range(100):
        reply = await second.call(again)
        if not isinstance(reply, frames.ErrorReply):
            break
        assert reply.status == Status.CLIENT_ONLINE
        await asyncio.sleep(0.02)
    assert reply == frames.ClientReply(models.ClientInfo(client.id, "roamer", client.mode, True))


async def test_session_released_on_disconnect_is_usable_on_another_server(
    start_server: StartServer, server: ServerProcess, connect: Connect
) -> None:
    other = await start_server()
    first = await connect(server)
    client = await log_in_new(first, "traveller")
    await first.close()
    second = await WireClient.connect(other.address)
    try:
        for _ in range(100):
            reply = await second.call(frames.Login(client.id, None))
            if isinstance(reply, frames.ClientReply):
                break
            await asyncio.sleep(0.02)
        assert isinstance(reply, frames.ClientReply) and reply.client.id == client.id
    finally:
        await second.close()


async def test_a_session_whose_release_failed_is_released_later(
    dsn: str, start_server: StartServer, connect: Connect
) -> None:
    """The client's connection closes while its row is locked, so ending its session
    times out; the session is released once the database lets it, not held for ever."""
    server, other = await start_server(statement_timeout=0.5), await start_server()
    first = await connect(server)
    client = await log_in_new(first, "unlucky")
    blocker = await asyncpg.connect(dsn)
    try:
        async with blocker.transaction():
            await blocker.execute("SELECT FROM courier_clients WHERE id = $1 FOR UPDATE", client.id)
            await first.close()
            await asyncio.sleep(1.5)  # the first release has failed by now
    finally:
        await blocker.close()
    await log_in_once_released(await connect(other), client.id, within=5)
