"""Failover: a middleware dies under a client, which carries on via another one."""

from __future__ import annotations

import asyncio
import collections
import signal
import time
from collections.abc import Callable

import pytest
from client_harness import Connect, open_client, register

import courier
from courier import errors
from helpers.names import Unique
from helpers.servers import StartServer, address, addresses, closed_port_address


async def test_a_killed_server_fails_the_call_in_flight_then_the_client_carries_on(
    start_server: StartServer, unique: Unique
) -> None:
    doomed, survivor = await start_server(), await start_server()
    name = unique("steadfast")
    client_id = await register(address(survivor), name)
    calls: list[courier.CallRecord] = []
    async with courier.AsyncClient.connect(
        addresses([doomed, survivor]),
        name=name,
        recorder=lambda row: calls.append(courier.CallRecord._make(row)),
    ) as client:
        assert client.server == address(doomed)
        queue = await client.create_queue(unique("q"))
        in_flight = asyncio.create_task(client.receive(queue, timeout=30))
        await asyncio.sleep(0.3)  # the RECEIVE is now waiting on the server

        doomed.signal(signal.SIGKILL)
        with pytest.raises(errors.ConnectionLost, match=address(doomed)):
            await in_flight

        (sent,) = await client.send(queue, "after the crash")
        assert client.server == address(survivor)
        assert client.client_id == client_id
        assert (await client.pop(queue)).id == sent

    lost = [call for call in calls if call.status == "CONNECTION_LOST"]
    assert [(call.operation, call.server) for call in lost] == [("receive", address(doomed))]
    logins = [call for call in calls if call.operation == "login_proof" and call.status == "OK"]
    assert [call.server for call in logins] == [address(doomed), address(survivor)]


async def test_the_sync_client_fails_over_too(start_server: StartServer, unique: Unique) -> None:
    doomed, survivor = await start_server(), await start_server()
    name = unique("steady")
    await register(address(survivor), name)
    client = await open_client("sync", addresses([doomed, survivor]), name=name)
    try:
        queue = await client.create_queue(unique("q"))
        doomed.signal(signal.SIGKILL)
        await wait_until(lambda: client.server is None)  # the client saw the connection drop
        await client.send(queue, "still here")
        assert client.server == address(survivor)
        assert (await client.pop(queue)).text == "still here"
    finally:
        await client.close()


async def test_a_dead_first_server_is_skipped(connect: Connect, start_server: StartServer) -> None:
    live = await start_server()
    client = await connect(f"{closed_port_address()},{address(live)}")
    assert client.server == address(live)
    assert await client.ping() > 0


async def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


async def test_after_a_kill_the_client_is_back_on_a_survivor_within_a_second(
    start_server: StartServer, unique: Unique
) -> None:
    doomed, survivor = await start_server(), await start_server()
    name, watcher_name = unique("fast"), unique("watcher")
    await register(address(survivor), name)
    await register(address(survivor), watcher_name)
    await asyncio.sleep(1.1)  # past a new instance's grace (courier_instance_dead_v1)
    async with (
        courier.AsyncClient.connect(addresses([doomed, survivor]), name=name) as client,
        courier.AsyncClient.connect(address(survivor), name=watcher_name) as watcher,
    ):
        assert client.server == address(doomed)
        queue = await client.create_queue(unique("q"))
        await client.send(queue, "held through the doomed middleware")
        await client.pop(queue, lease=60)

        doomed.signal(signal.SIGKILL)
        killed = time.monotonic()
        await wait_until(lambda: client.server is None)
        await client.ping()  # logs in again on the survivor
        assert client.server == address(survivor)
        assert time.monotonic() - killed < 1.0
        # The lease held through the dead middleware is released at once, not in 60 s.
        again = await watcher.receive(queue, timeout=5, lease=30)
        assert again is not None and again.deliveries == 2
        assert time.monotonic() - killed < 2.0


async def test_the_clients_of_a_killed_server_spread_over_the_survivors(
    start_server: StartServer, unique: Unique
) -> None:
    doomed, first, second = [await start_server() for _ in range(3)]
    servers = addresses([doomed, first, second])
    names = [unique(f"spread{n}") for n in range(16)]
    for name in names:
        await register(address(first), name)
    await asyncio.sleep(1.1)  # past a new instance's grace (courier_instance_dead_v1)
    clients = [await courier.AsyncClient.connect(servers, name=name) for name in names]
    try:
        assert {client.server for client in clients} == {address(doomed)}
        doomed.signal(signal.SIGKILL)
        await wait_until(lambda: all(client.server is None for client in clients))
        await asyncio.gather(*(client.ping() for client in clients))
        landed = collections.Counter(client.server for client in clients)
        # Each picks a survivor at random: all 16 on one has odds of 1 in 32,768.
        assert set(landed) == {address(first), address(second)}
    finally:
        for client in clients:
            await client.close()
