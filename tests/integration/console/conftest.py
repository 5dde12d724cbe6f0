"""Fixtures for the console's API tests (the harness is helpers.consoles).

    start_console(dsn=..., **settings)  a running console; stopped after the test
    console                             one on the test's ``dsn``
    home                                an environment with an empty data dir, no COURIER_*
    start(args, env)                    a running `courier console` process; stopped after

The first two use the shared ADMIN_TOKEN of helpers.consoles.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from helpers.consoles import (
    ConsoleProcess,
    RunningConsole,
    StartConsole,
    StartProcess,
    running_console,
)
from helpers.servers import environment_without_settings


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


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    """An environment with an empty data dir and no COURIER_* settings."""
    env = environment_without_settings()
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    return env


@pytest.fixture
def start(tmp_path: Path) -> Iterator[StartProcess]:
    started: list[ConsoleProcess] = []

    def run(args: list[str], env: dict[str, str]) -> ConsoleProcess:
        console = ConsoleProcess(args, env, tmp_path / f"console-{len(started)}.log")
        started.append(console)
        console.wait_ready()
        return console

    yield run
    for console in started:
        console.stop()
