"""The curated public API: exactly these names, each one real."""

from __future__ import annotations

import inspect
import subprocess
import sys

import courier
from courier.client import async_client, sync_client

PUBLIC = {
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
}


def test_all_is_exactly_the_curated_list() -> None:
    assert set(courier.__all__) == PUBLIC
    assert len(courier.__all__) == len(PUBLIC)


def test_every_public_name_resolves() -> None:
    for name in courier.__all__:
        assert getattr(courier, name) is not None, name
    assert courier.AsyncClient is async_client.AsyncClient
    assert courier.Client is sync_client.Client
    assert issubclass(courier.errors.QueueNotFound, courier.errors.CourierError)
    assert courier.__version__.count(".") >= 1


def test_unknown_names_are_attribute_errors() -> None:
    assert not hasattr(courier, "NoSuchThing")


def test_the_sync_client_offers_every_async_operation() -> None:
    """Client is generated from AsyncClient; no coroutine method may be left out."""
    coroutines = {
        name
        for name, member in inspect.getmembers(courier.AsyncClient, inspect.iscoroutinefunction)
        if not name.startswith("_")
    }
    missing = {name for name in coroutines if not callable(getattr(courier.Client, name, None))}
    assert not missing
    assert courier.Client.send.__doc__ == courier.AsyncClient.send.__doc__


def test_importing_courier_does_not_load_the_client() -> None:
    """The server and database tiers import courier without paying for the client."""
    code = "import sys, courier; print('courier.client' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr
