"""The one path of every benchmark send and publish: it applies the kind's delivery mode.

A kind is persistent or not (``kinds.Kind.persistent``). When the client library
takes ``persistent=`` (delivery modes), it is passed; without it every message is
stored durably whatever its kind, and ``ran_persistent`` says so, so that the
verdict's evidence never claims a mode that was not applied.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from courier.client import AsyncClient
from courier.client.transactions import Transaction
from courier.lab.supply import kinds

MODES_APPLIED = "persistent" in inspect.signature(AsyncClient.send).parameters
"""Does this client library take a delivery mode?"""


def ran_persistent(kind: kinds.Kind) -> bool:
    """Whether messages of this kind were stored durably in this build."""
    return kind.persistent or not MODES_APPLIED


def _mode(kind: kinds.Kind) -> dict[str, Any]:
    return {"persistent": kind.persistent} if MODES_APPLIED else {}


async def deliver(
    client: AsyncClient,
    kind: kinds.Kind,
    destination: str,
    body: str,
    properties: Mapping[str, str],
    tx: Transaction | None = None,
) -> None:
    """Send (queue kinds) or publish (topic kinds), within ``tx`` when given."""
    options = {"properties": properties, **_mode(kind)}
    if tx is not None and kind.topic:
        tx.publish(destination, body, **options)
    elif tx is not None:
        tx.send(destination, body, **options)
    elif kind.topic:
        await client.publish(destination, body, **options)
    else:
        await client.send(destination, body, **options)
