"""The one path of every benchmark send and publish: it applies the kind's delivery mode.

A kind is persistent or not (``kinds.Kind.persistent``), and its messages are sent
with that delivery mode. The evidence's ``ran_persistent`` records the mode applied
(runs recorded before delivery modes existed stored every kind durably).
"""

from __future__ import annotations

from typing import Any

from courier import models
from courier.client import AsyncClient
from courier.client.transactions import Transaction
from courier.lab.supply import kinds


def ran_persistent(kind: kinds.Kind) -> bool:
    """Whether messages of this kind are stored durably."""
    return kind.persistent


async def deliver(
    client: AsyncClient,
    kind: kinds.Kind,
    destination: str,
    body: str,
    properties: models.Properties,
    tx: Transaction | None = None,
) -> None:
    """Send (queue kinds) or publish (topic kinds), within ``tx`` when given."""
    options: dict[str, Any] = {"properties": properties, "persistent": kind.persistent}
    if tx is not None and kind.topic:
        tx.publish(destination, body, **options)
    elif tx is not None:
        tx.send(destination, body, **options)
    elif kind.topic:
        await client.publish(destination, body, **options)
    else:
        await client.send(destination, body, **options)
