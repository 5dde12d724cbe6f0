"""Fixtures for the middleware tests: real `courier serve` processes and raw clients.

start_server(**options)  starts `courier serve` on the test's database (``dsn``)
                         with short heartbeat/ttl; options are serve flags
                         (max_clients=2, ..., or dsn= another database); stopped
                         with SIGTERM afterwards
                         The servers take open logins too (``open_login=False``
                         to refuse them): these tests speak raw LOGIN frames to
                         reach what lies behind a login; logins with secrets are
                         tested in test_server_auth.py.
server                   one started server
connect(server)          a ``WireClient`` on it, closed afterwards
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from server_harness import Connect, WireClient

from helpers.servers import ServerProcess, StartServer, starting_servers


@pytest.fixture
async def start_server(dsn: str, tmp_path: Path) -> AsyncIterator[StartServer]:
    async with starting_servers(dsn, tmp_path) as start:

        async def start_open(**options: object) -> ServerProcess:
            options.setdefault("open_login", True)
            return await start(**options)

        yield start_open


@pytest.fixture
async def server(start_server: StartServer) -> ServerProcess:
    return await start_server()


@pytest.fixture
async def connect() -> AsyncIterator[Connect]:
    clients: list[WireClient] = []

    async def open_client(server: ServerProcess) -> WireClient:
        client = await WireClient.connect(server.address)
        clients.append(client)
        return client

    yield open_client
    for client in clients:
        await client.close()
