"""The database goes away and comes back: UNAVAILABLE meanwhile, then full service."""

from __future__ import annotations

import asyncio
import time
import urllib.parse

import asyncpg
from server_harness import Connect, WireClient, log_in_new

from courier import models
from courier.db import listen
from courier.errors import Status
from courier.protocol import frames
from helpers.servers import ServerProcess

TIME = models.Order.TIME


async def admin_execute(admin_dsn: str, *statements: str) -> None:
    connection = await asyncpg.connect(admin_dsn)
    try:
        for statement in statements:
            await connection.execute(statement)
    finally:
        await connection.close()


async def cut_off(admin_dsn: str, database: str) -> None:
    """Refuse new connections to the database and end the open ones."""
    await admin_execute(
        admin_dsn,
        f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false',
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        f"WHERE datname = '{database}' AND pid <> pg_backend_pid()",
    )


async def restore(admin_dsn: str, database: str) -> None:
    await admin_execute(admin_dsn, f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')


async def until_ok(client: WireClient, request: frames.Request, within: float) -> frames.Reply:
    deadline = time.monotonic() + within
    while isinstance(reply := await client.call(request), frames.ErrorReply):
        assert reply.status == Status.UNAVAILABLE, reply
        assert time.monotonic() < deadline, "the server did not recover"
        await asyncio.sleep(0.1)
    return reply


async def test_outage_gives_unavailable_then_the_server_recovers(
    dsn: str, postgres_admin_dsn: str, server: ServerProcess, connect: Connect
) -> None:
    database = urllib.parse.urlsplit(dsn).path.lstrip("/")
    client = await connect(server)
    await log_in_new(client, "survivor")
    queue = (await client.ok(frames.CreateQueue("kept"))).queue  # type: ignore[union-attr]
    await client.ok(frames.Send((queue.id,), b"before the outage", None, 5, None))

    await cut_off(postgres_admin_dsn, database)
    try:
        for request in (
            frames.ListQueues(),
            frames.Send((queue.id,), b"during", None, 5, None),
            frames.Register("newcomer", models.ClientMode.READ_WRITE),
        ):
            assert await client.error(request) == Status.UNAVAILABLE
        assert isinstance(await client.ok(frames.Ping()), frames.Pong)  # no database needed
        await asyncio.sleep(0.5)  # several failed heartbeats
        assert server.process is not None and server.process.poll() is None
    finally:
        await restore(postgres_admin_dsn, database)

    listed = await until_ok(client, frames.ListQueues(), within=10)
    assert listed == frames.QueueListReply((models.Queue(queue.id, "kept", 1),))
    popped = await client.ok(frames.Read(queue.id, None, TIME, pop=True))
    assert isinstance(popped, frames.MessageReply) and popped.message.text == "before the outage"
    # The heartbeat survived the outage.
    first = await beat_time(dsn)
    await asyncio.sleep(0.5)
    assert await beat_time(dsn) > first
    # Notifications flow again: a receive is woken by a send.
    await wait_for_listener(dsn)
    waiting = client.submit(frames.Receive(queue.id, None, TIME, timeout_ms=20_000))
    await asyncio.sleep(0.3)
    started = time.monotonic()
    await send_from_another_client(server, queue.id, "after the outage")
    reply = await asyncio.wait_for(waiting, 20)
    assert isinstance(reply, frames.MessageReply) and reply.message.text == "after the outage"
    assert time.monotonic() - started < 5


async def beat_time(dsn: str) -> object:
    connection = await asyncpg.connect(dsn)
    try:
        return await connection.fetchval("SELECT max(heartbeat_at) FROM courier_instances")
    finally:
        await connection.close()


async def wait_for_listener(dsn: str) -> None:
    connection = await asyncpg.connect(dsn)
    try:
        for _ in range(100):
            listening = await connection.fetchval(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database()"
                f" AND application_name = '{listen.APPLICATION_NAME}'"
            )
            if listening:
                return
            await asyncio.sleep(0.1)
    finally:
        await connection.close()
    raise AssertionError("the LISTEN connection never came back")


async def send_from_another_client(server: ServerProcess, queue_id: int, body: str) -> None:
    sender = await WireClient.connect(server.address)
    try:
        await log_in_new(sender, "sender")
        await sender.ok(frames.Send((queue_id,), body.encode(), None, 5, None))
    finally:
        await sender.close()
