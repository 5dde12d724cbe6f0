"""The Courier client library: ``AsyncClient`` and its blocking face ``Client``."""

from __future__ import annotations

from courier.client.async_client import AsyncClient, ClientOptions, Servers
from courier.client.batches import Outgoing
from courier.client.client_refs import ClientRef
from courier.client.measurement_hook import CallRecord, Recorder
from courier.client.queue_refs import QueueRef
from courier.client.sync_client import Client

__all__ = [
    "AsyncClient",
    "CallRecord",
    "Client",
    "ClientOptions",
    "ClientRef",
    "Outgoing",
    "QueueRef",
    "Recorder",
    "Servers",
]
