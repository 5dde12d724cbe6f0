"""Courier: a three-tier message-passing system on PostgreSQL.

The public API, for programs that talk to Courier:

    import courier

    with courier.Client.connect("127.0.0.1:7400", name="alice", secret=secret) as client:
        client.send("jobs", "resize photo 17")

``secret`` is the client's secret, given at registration (``register(name,
secret=...)``; ``courier.scram.new_secret()`` makes one). ``AsyncClient`` is the
asyncio client; ``Client`` is its blocking face. Every error
is a ``courier.errors.CourierError``. The client classes load on first use, so
importing another part of the package (the server, the database tier) does not pull
in the client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from courier import errors
from courier.models import (
    ClientIdentity,
    ClientInfo,
    ClientMode,
    Message,
    Order,
    Queue,
    Settled,
    Subscription,
    Topic,
)

if TYPE_CHECKING:
    from courier.client import AsyncClient, CallRecord, Client, Outgoing

    __version__: str

__all__ = [
    "AsyncClient",
    "CallRecord",
    "Client",
    "ClientIdentity",
    "ClientInfo",
    "ClientMode",
    "Message",
    "Order",
    "Outgoing",
    "Queue",
    "Settled",
    "Subscription",
    "Topic",
    "__version__",
    "errors",
]

_LAZY = {"AsyncClient", "CallRecord", "Client", "Outgoing"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module("courier.client"), name)
    if name == "__version__":  # reading package metadata is slow; most imports never ask
        from importlib import metadata

        return metadata.version("courier")
    raise AttributeError(f"module 'courier' has no attribute {name!r}")
