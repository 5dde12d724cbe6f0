"""The client library against real middleware: request/reply across servers, failover."""

from __future__ import annotations

import asyncio
import signal

import courier
from helpers.servers import StartServer, address, addresses


async def test_request_and_reply_across_two_middleware(start_server: StartServer) -> None:
    server_a, server_b = await start_server(), await start_server()
    a, b = address(server_a), address(server_b)
    async with courier.AsyncClient.connect(a) as setup:
        await setup.register("asker")
        await setup.register("worker")
        await setup.login(name="asker")
        await setup.create_queue("rpc")
    async with (
        courier.AsyncClient.connect(a, name="asker") as asker,
        courier.AsyncClient.connect(b, name="worker") as worker,
    ):

        async def serve_one() -> None:
            request = await worker.receive("rpc", timeout=10)
            assert request is not None
            await worker.reply(request, request.body.upper())

        serving = asyncio.create_task(serve_one())
        answer = await asker.request("rpc", "hello", timeout=10)
        await serving
        assert answer.text == "HELLO" and answer.sender == worker.client_id
        assert await asker.queues_for_me() == []


async def test_client_fails_over_when_its_middleware_stops(start_server: StartServer) -> None:
    server_a, server_b = await start_server(), await start_server()
    servers = addresses([server_a, server_b])
    async with courier.AsyncClient.connect(servers) as setup:
        await setup.register("mover")
        await setup.login(name="mover")
        await setup.create_queue("q")
    async with courier.AsyncClient.connect(servers, name="mover") as client:
        assert client.server == address(server_a)
        await client.send("q", "before")
        server_a.signal(signal.SIGTERM)
        assert await server_a.wait() == 0
        await client.send("q", "after")
        assert client.server == address(server_b)
        bodies = [(await client.pop("q")), (await client.pop("q"))]
        assert [m.text for m in bodies if m is not None] == ["before", "after"]
