"""Instance registry, heartbeats, expiry of dead instances, graceful shutdown."""

from __future__ import annotations

import asyncio
import signal
import time

import asyncpg
from server_harness import Connect, WireClient, log_in_new, log_in_once_released

from courier import models
from courier.errors import Status
from courier.protocol import frames
from helpers.servers import ServerProcess, StartServer


async def fetch(dsn: str, query: str) -> list[asyncpg.Record]:
    connection = await asyncpg.connect(dsn)
    try:
        return list(await connection.fetch(query))
    finally:
        await connection.close()


async def test_instance_registers_with_its_address_and_beats(
    dsn: str, server: ServerProcess
) -> None:
    rows = await fetch(dsn, "SELECT address, heartbeat_at FROM courier_instances")
    assert [row["address"] for row in rows] == [f"127.0.0.1:{server.port}"]
    await asyncio.sleep(0.6)  # three heartbeat intervals
    later = await fetch(dsn, "SELECT heartbeat_at FROM courier_instances")
    assert later[0]["heartbeat_at"] > rows[0]["heartbeat_at"]


async def test_survivor_releases_the_sessions_of_a_killed_instance(
    dsn: str, start_server: StartServer, connect: Connect
) -> None:
    # Frozen first: its connections, its advisory lock and its fresh heartbeat (a ttl
    # no busy machine outlasts) all say it is alive, so the login is surely refused.
    # Only then is it killed, which frees its lock: the survivor takes the session.
    ttl = 8.0
    doomed = await start_server(instance_ttl=ttl)
    survivor = await start_server(instance_ttl=ttl)
    on_doomed = await connect(doomed)
    client = await log_in_new(on_doomed, "orphan")
    doomed.signal(signal.SIGSTOP)
    on_survivor = await connect(survivor)
    login = frames.Login(client.id, None)
    assert await on_survivor.error(login) == Status.CLIENT_ONLINE
    doomed.signal(signal.SIGKILL)
    assert await doomed.wait() == -signal.SIGKILL
    await log_in_once_released(on_survivor, client.id, within=ttl + 10)
    rows = await fetch(dsn, "SELECT address FROM courier_instances")
    assert [row["address"] for row in rows] == [f"127.0.0.1:{survivor.port}"]


async def test_sigterm_finishes_requests_in_flight_and_unregisters(
    dsn: str, server: ServerProcess, connect: Connect
) -> None:
    client = await connect(server)
    await log_in_new(client, "last")
    queue = (await client.ok(frames.CreateQueue("q"))).queue  # type: ignore[union-attr]
    waiting = client.submit(frames.Receive(queue.id, None, models.Order.TIME, timeout_ms=60_000))
    blocker = await asyncpg.connect(dsn)
    try:
        # Hold a lock that the next request needs, so it is surely in flight at SIGTERM.
        transaction = blocker.transaction()
        await transaction.start()
        await blocker.execute("LOCK TABLE courier_queues IN ACCESS EXCLUSIVE MODE")
        in_flight = client.submit(frames.CreateQueue("during shutdown"))
        await asyncio.sleep(0.3)
        server.signal(signal.SIGTERM)
        await asyncio.sleep(0.3)
        assert not in_flight.done()
        await transaction.rollback()
    finally:
        await blocker.close()
    created = await asyncio.wait_for(in_flight, 10)
    assert isinstance(created, frames.QueueReply) and created.queue.name == "during shutdown"
    ended = await asyncio.wait_for(waiting, 10)
    assert isinstance(ended, frames.ErrorReply) and ended.status == Status.QUEUE_EMPTY
    assert await server.wait() == 0
    await client.wait_closed_by_server()
    assert await fetch(dsn, "SELECT id FROM courier_instances") == []
    online = await fetch(
        dsn, "SELECT id FROM courier_clients WHERE session_instance_id IS NOT NULL"
    )
    assert online == []


async def test_sigint_stops_cleanly_too(dsn: str, server: ServerProcess, connect: Connect) -> None:
    client = await connect(server)
    await log_in_new(client, "ctrl-c")
    server.signal(signal.SIGINT)
    assert await server.wait() == 0
    assert "Traceback" not in server.log
    assert await fetch(dsn, "SELECT id FROM courier_instances") == []
    try:
        await WireClient.connect(server.address)
    except OSError:
        pass
    else:
        raise AssertionError("a stopped server still accepts connections")


async def test_an_expired_instance_registers_again_and_keeps_its_sessions(
    dsn: str, server: ServerProcess, connect: Connect
) -> None:
    client = await connect(server)
    info = await log_in_new(client, "loyal")
    [old] = await fetch(dsn, "SELECT id FROM courier_instances")
    # What a survivor does to an instance it has not heard from for a ttl.
    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute("DELETE FROM courier_instances")
    finally:
        await connection.close()
    started = time.monotonic()
    while not (rows := await fetch(dsn, "SELECT id, address FROM courier_instances")):
        assert time.monotonic() - started < 5, "the instance never registered again"
        await asyncio.sleep(0.05)
    [new] = rows
    assert new["id"] != old["id"] and new["address"] == f"127.0.0.1:{server.port}"
    holder = f"SELECT session_instance_id AS id FROM courier_clients WHERE id = {info.id}"
    while (await fetch(dsn, holder))[0]["id"] != new["id"]:
        assert time.monotonic() - started < 5, "the session was not reclaimed"
        await asyncio.sleep(0.05)
    assert isinstance(await client.ok(frames.CreateQueue("still mine")), frames.QueueReply)
    # The session really is held: nobody else can log in as this client.
    other = await connect(server)
    assert await other.error(frames.Login(info.id, None)) == Status.CLIENT_ONLINE


async def test_a_starved_pool_does_not_get_a_healthy_instance_expired(
    dsn: str, start_server: StartServer, connect: Connect
) -> None:
    """Every pooled connection of one instance waits on a lock far longer than its
    ttl: its heartbeats, on a connection of their own, keep it registered and its
    clients' sessions alive; a request that finds no free connection gets
    UNAVAILABLE after the pool timeout instead of waiting for ever."""
    busy = await start_server(
        pool_size=1, no_batching=True, instance_ttl=1, heartbeat_interval=0.2, pool_timeout=0.5
    )
    await start_server(heartbeat_interval=0.2)  # a watcher, expiring silent instances
    sender, other = await connect(busy), await connect(busy)
    client = await log_in_new(sender, "starved")
    await log_in_new(other, "waiting")
    queue = (await sender.ok(frames.CreateQueue("locked"))).queue  # type: ignore[union-attr]
    blocker = await asyncpg.connect(dsn)
    try:
        transaction = blocker.transaction()
        await transaction.start()
        await blocker.execute("SELECT FROM courier_queues WHERE id = $1 FOR UPDATE", queue.id)
        stuck = asyncio.create_task(sender.call(frames.Send((queue.id,), b"x", None, 5, None)))
        await asyncio.sleep(0.3)  # the send holds the pool's only connection now
        started = time.monotonic()
        assert await other.error(frames.GetQueue(queue.id, None)) == Status.UNAVAILABLE
        assert 0.4 < time.monotonic() - started < 3
        await asyncio.sleep(3)  # three times the ttl
        rows = await fetch(dsn, "SELECT address FROM courier_instances")
        assert f"127.0.0.1:{busy.port}" in [row["address"] for row in rows]
        online = await fetch(dsn, f"SELECT session_instance_id FROM courier_clients"
                                  f" WHERE id = {client.id}")  # fmt: skip
        assert online[0]["session_instance_id"] is not None
        await transaction.rollback()
        assert isinstance(await stuck, frames.MessageIdsReply)
    finally:
        await blocker.close()
