"""Fixtures for the client and CLI tests: real `courier serve` processes on a real database.

Servers come from the middleware tests' harness (``ServerProcess``). Most tests share
one database and two servers per module and keep out of each other's way with
unique client and queue names; tests that kill or fill servers start their own.

    module_dsn       (module) a migrated database for the module's tests
    servers          (module) two running servers on ``module_dsn``
    start_server()   (function) one more server (``dsn=`` another database, serve flags
                     as keywords); stopped after the test
    unique(prefix)   a name no other test has used
    connect(servers, **login)
                     (function, twice: "async" and "sync") a connected client, closed
                     after the test; the sync ``courier.Client`` is driven through
                     ``Blocking``, so one test body covers both clients
"""

from __future__ import annotations

import asyncio
import itertools
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import courier
from integration.server.server_harness import ServerProcess

StartServer = Callable[..., Awaitable[ServerProcess]]
Connect = Callable[..., Awaitable[Any]]

_numbers = itertools.count(1)


def address(server: ServerProcess) -> str:
    host, port = server.address
    return f"{host}:{port}"


def addresses(servers: list[ServerProcess]) -> str:
    return ",".join(address(server) for server in servers)


def closed_port_address() -> str:
    """host:port where nothing listens (a port just bound and released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


@pytest.fixture(scope="module")
def module_dsn(databases: Any, template_database: str) -> Iterator[str]:
    dsn: str = databases.create(template=template_database)
    try:
        yield dsn
    finally:
        databases.drop(dsn)


@pytest.fixture(scope="module")
async def servers(
    module_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[list[ServerProcess]]:
    log_dir = tmp_path_factory.mktemp("servers")
    started = [ServerProcess(module_dsn, log_dir) for _ in range(2)]
    try:
        for server in started:
            await server.start()
        yield started
    finally:
        for server in started:
            await server.stop()


@pytest.fixture
async def start_server(module_dsn: str, tmp_path: Path) -> AsyncIterator[StartServer]:
    started: list[ServerProcess] = []

    async def start(dsn: str = module_dsn, **options: object) -> ServerProcess:
        server = ServerProcess(dsn, tmp_path, **options)
        started.append(server)
        return await server.start()

    yield start
    for server in started:
        await server.stop()


@pytest.fixture
def unique() -> Callable[[str], str]:
    return lambda prefix: f"{prefix}-{next(_numbers)}"


class Blocking:
    """A sync ``courier.Client`` with an awaitable face: each call runs in a worker thread."""

    def __init__(self, client: courier.Client) -> None:
        self.client = client

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.client, name)
        if not callable(attribute):
            return attribute

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(attribute, *args, **kwargs)

        return call


async def open_client(flavour: str, servers: str, **options: Any) -> Any:
    if flavour == "async":
        return await courier.AsyncClient.connect(servers, **options)
    return Blocking(await asyncio.to_thread(courier.Client.connect, servers, **options))


@pytest.fixture(params=["async", "sync"])
async def connect(request: pytest.FixtureRequest) -> AsyncIterator[Connect]:
    opened: list[Any] = []

    async def connect_client(servers: str, **options: Any) -> Any:
        client = await open_client(request.param, servers, **options)
        opened.append(client)
        return client

    yield connect_client
    for client in opened:
        await client.close()
