"""A real console (uvicorn on a free loopback port) over a database, with an HTTP
client for it; shared by the console's API tests and the browser tests. And
`courier console` as a user runs it: a real process on a free port."""

from __future__ import annotations

import contextlib
import re
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from courier.console import serving, settings
from helpers.servers import COURIER, free_port

ADMIN_TOKEN = "console-test-admin-token"
CSRF_FIELD = re.compile(r'name="csrf_token" value="([^"]+)"')


async def csrf_token(http: httpx.AsyncClient) -> str:
    """The CSRF token of the session in this client's cookie, as the pages' forms
    carry it."""
    page = await http.get("/admin")
    found = CSRF_FIELD.search(page.text)
    assert found is not None, page.text
    return found[1]


@dataclass
class RunningConsole:
    url: str
    http: httpx.AsyncClient
    admin_token: str

    async def get_json(self, path: str, **query: object) -> dict[str, Any]:
        response = await self.http.get(path, params={k: str(v) for k, v in query.items()})
        assert response.status_code == 200, response.text
        body = response.json()
        assert isinstance(body, dict)
        return body


StartConsole = Callable[..., Awaitable[RunningConsole]]


@contextlib.asynccontextmanager
async def running_console(dsn: str, **overrides: Any) -> AsyncIterator[RunningConsole]:
    console_settings = settings.ConsoleSettings(
        dsn=dsn, admin_token=ADMIN_TOKEN, port=0, **overrides
    )
    async with (
        serving.running(console_settings) as url,
        httpx.AsyncClient(base_url=url, timeout=10.0) as http,
    ):
        yield RunningConsole(url, http, ADMIN_TOKEN)


PROCESS_START_TIMEOUT = 20.0


class ConsoleProcess:
    """`courier console --port <free port> ARGS`, its output in ``log``."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                [str(COURIER), "console", "--port", str(self.port), *args],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            )  # fmt: skip

    def wait_ready(self) -> None:
        """Until it answers HTTP at all (a console with a viewer token answers 401)."""
        deadline = time.monotonic() + PROCESS_START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"console exited:\n{self.output}")
            try:
                if httpx.get(self.url + "/api/rates", timeout=1).status_code in {200, 401}:
                    return
            except httpx.TransportError:
                time.sleep(0.1)
        raise AssertionError(f"console did not start:\n{self.output}")

    @property
    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


StartProcess = Callable[[list[str], dict[str, str]], ConsoleProcess]
