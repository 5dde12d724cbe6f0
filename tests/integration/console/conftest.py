"""Fixtures for the console's API tests (the harness is helpers.consoles).

    start_console(dsn=..., **settings)  a running console; stopped after the test
    console                             one on the test's ``dsn``

Both use the shared ADMIN_TOKEN of helpers.consoles.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest

from helpers.consoles import RunningConsole, StartConsole, running_console


@pytest.fixture
async def start_console(dsn: str) -> AsyncIterator[StartConsole]:
    async with contextlib.AsyncExitStack() as stack:

        async def start(**overrides: object) -> RunningConsole:
            database = str(overrides.pop("dsn", dsn))
            return await stack.enter_async_context(running_console(database, **overrides))

        yield start


@pytest.fixture
async def console(start_console: StartConsole) -> RunningConsole:
    return await start_console()
