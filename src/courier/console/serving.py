"""Serving the console with uvicorn: in the foreground, or in the background of a
running event loop (tests, demos) on a free port."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import uvicorn

from courier.console import app, settings

STARTUP_TIMEOUT_S = 30.0


def uvicorn_config(console_settings: settings.ConsoleSettings, log_level: str) -> uvicorn.Config:
    return uvicorn.Config(
        app.create_app(console_settings),
        host=console_settings.host,
        port=console_settings.port,
        log_level=log_level,
        lifespan="on",
        access_log=False,
    )


def serve_forever(console_settings: settings.ConsoleSettings, log_level: str = "warning") -> None:
    """Run until Ctrl-C or SIGTERM."""
    uvicorn.Server(uvicorn_config(console_settings, log_level)).run()


@contextlib.asynccontextmanager
async def running(
    console_settings: settings.ConsoleSettings, log_level: str = "warning"
) -> AsyncIterator[str]:
    """Serve in this event loop for the duration of the block; yields the base URL.
    Port 0 in the settings picks a free port."""
    server = uvicorn.Server(uvicorn_config(console_settings, log_level))
    task = asyncio.create_task(server.serve(), name="courier-console")
    try:
        await wait_started(server, task)
        yield f"http://{console_settings.host}:{bound_port(server)}"
    finally:
        server.should_exit = True
        await task


async def wait_started(server: uvicorn.Server, task: asyncio.Task[None]) -> None:
    deadline = asyncio.get_running_loop().time() + STARTUP_TIMEOUT_S
    while not server.started:
        if task.done():
            task.result()  # raises what stopped the server
            raise RuntimeError("the console stopped while starting")
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError("the console did not start in time")
        await asyncio.sleep(0.02)


def bound_port(server: uvicorn.Server) -> int:
    for listener in server.servers:
        for sock in listener.sockets:
            return int(sock.getsockname()[1])
    raise RuntimeError("the console listens on no socket")
