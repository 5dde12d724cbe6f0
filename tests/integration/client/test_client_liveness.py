"""Liveness: a client that goes silent is taken for dead after the idle timeout, and
one that keeps its connection alive with PINGs is not."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest
from client_harness import register

import courier
from courier import errors
from helpers.names import Unique
from helpers.servers import StartServer, address


class FreezingProxy:
    """A TCP proxy on loopback that forwards both ways until ``freeze``; then it
    forwards nothing but keeps every socket open, as a network gone silent would."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.frozen = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self._tasks: list[asyncio.Task[object]] = []

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    def freeze(self) -> None:
        self.frozen.set()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in self._writers:
            writer.transport.abort()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        current = asyncio.current_task()
        assert current is not None
        self._tasks.append(current)
        upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        self._writers += [writer, upstream_writer]
        await asyncio.gather(
            self._pipe(reader, upstream_writer), self._pipe(upstream_reader, writer)
        )

    async def _pipe(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await source.read(65536):
                if self.frozen.is_set():
                    await asyncio.Event().wait()  # hold on to the sockets, forward nothing
                sink.write(data)
        sink.close()  # one side hung up: so does the other


@pytest.fixture
async def proxies() -> AsyncIterator[list[FreezingProxy]]:
    started: list[FreezingProxy] = []
    yield started
    for proxy in started:
        await proxy.close()


async def test_a_client_gone_silent_is_released_and_can_log_in_elsewhere(
    start_server: StartServer, proxies: list[FreezingProxy], unique: Unique
) -> None:
    watched, other = await start_server(idle_timeout=1), await start_server()
    proxy = FreezingProxy(watched.address)
    proxies.append(proxy)
    name = unique("silent")
    await register(address(other), name)
    client = await courier.AsyncClient.connect(
        await proxy.start(), name=name, heartbeat_interval=0.3, failover_timeout=1
    )
    queue = await client.create_queue(unique("q"))
    await client.send(queue, "held by the silent client")
    assert (await client.pop(queue, lease=60)) is not None

    await asyncio.sleep(2.5)  # idle, but its PINGs keep it alive past the idle timeout
    assert client.server is not None  # the connection never dropped

    proxy.freeze()
    frozen = time.monotonic()
    async with courier.AsyncClient.connect(address(other)) as anonymous:
        while True:  # the session is held until the silent connection is dropped
            try:
                successor = await courier.AsyncClient.connect(address(other), name=name)
                break
            except errors.ClientOnline:
                assert time.monotonic() - frozen < 5, "the silent client was never dropped"
                await asyncio.sleep(0.1)
        assert time.monotonic() - frozen >= 0.9
        async with successor:
            # Its lease was released with the session, not after 60 s.
            again = await successor.receive(queue, timeout=5, lease=30)
            assert again is not None and again.deliveries == 2
        assert await anonymous.ping() > 0
    with contextlib.suppress(errors.CourierError):
        await client.close()
