"""A real console (uvicorn on a free loopback port) over a database, with an HTTP
client for it; shared by the console's API tests and the browser tests."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx

from courier.console import serving, settings

ADMIN_TOKEN = "console-test-admin-token"


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
