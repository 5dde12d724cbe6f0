"""Fixtures for the CLI tests: a way to run `courier` against the module's ``servers``.

``courier(*args, input=None, env=None)`` runs ``courier ARGS --servers <the test
servers>`` and returns the CompletedProcess (text); ``env`` adds variables, and
``with_servers=False`` leaves --servers out.
``courier.spawn(*args)`` starts the same in the background (Popen). ``courier.env`` is
the environment: no COURIER_* variables, XDG_DATA_HOME inside the test's tmp dir.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.servers import COURIER, ServerProcess, addresses, environment_without_settings


class CourierCLI:
    def __init__(self, server_list: str, env: dict[str, str]) -> None:
        self.servers = server_list
        self.env = env
        self.spawned: list[subprocess.Popen[str]] = []

    def __call__(
        self,
        *args: str,
        input: str | None = None,
        env: dict[str, str] | None = None,
        with_servers: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(args) if with_servers else [str(COURIER), *args],
            input=input,
            capture_output=True,
            text=True,
            env={**self.env, **(env or {})},
            timeout=60,
        )

    def spawn(self, *args: str) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            self.command(args),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
        )
        self.spawned.append(process)
        return process

    def command(self, args: tuple[str, ...]) -> list[str]:
        return [str(COURIER), *args, "--servers", self.servers]


@pytest.fixture
def courier(servers: list[ServerProcess], tmp_path: Path) -> Iterator[CourierCLI]:
    env = environment_without_settings()
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    cli = CourierCLI(addresses(servers), env)
    yield cli
    for process in cli.spawned:
        if process.poll() is None:
            process.kill()
            process.communicate()
