"""The client tests' two flavours of client, and ways to get one logged in.

A test body written against ``Connect`` runs once with ``courier.AsyncClient`` and
once with the sync ``courier.Client``, which ``Blocking`` gives an awaitable face.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import courier
from helpers.servers import ServerProcess, address

Connect = Callable[..., Awaitable[Any]]
"""The ``connect`` fixture: ``await connect(servers, **options)``, a connected client."""


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


async def register(server: str, name: str) -> int:
    """Register ``name`` through a short-lived anonymous ``AsyncClient``; its id."""
    async with courier.AsyncClient.connect(server) as anonymous:
        return (await anonymous.register(name)).id


async def logged_in(connect: Connect, server: ServerProcess, name: str) -> Any:
    """Register ``name`` and return a client logged in as it on ``server``."""
    anonymous = await connect(address(server))
    await anonymous.register(name)
    await anonymous.close()
    return await connect(address(server), name=name)
