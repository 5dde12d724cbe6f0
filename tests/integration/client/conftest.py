"""Fixtures for the client tests; the CLI tests share their servers.

Most tests share one database and two servers per module (``module_dsn`` and
``servers`` of tests/conftest.py) and keep out of each other's way with ``unique``
client and queue names; tests that kill or fill servers start their own.

    start_server()   (function) one more server (``dsn=`` another database, serve flags
                     as keywords); stopped after the test
    connect(servers, **login)
                     (function, twice: "async" and "sync") a connected client, closed
                     after the test; the sync ``courier.Client`` is driven through
                     ``client_harness.Blocking``, so one test body covers both clients
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from client_harness import Connect, open_client

from helpers.servers import StartServer, starting_servers


@pytest.fixture
async def start_server(module_dsn: str, tmp_path: Path) -> AsyncIterator[StartServer]:
    async with starting_servers(module_dsn, tmp_path) as start:
        yield start


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
