"""A transaction's operations as ``courier_commit_v3`` takes them: one array per field.

The stored function applies them in order, all or none; ``arguments`` lays a list
of operations out as its parallel arrays (a send's queues flattened, with a count
per operation).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from courier import models
from courier.db import jsonb


@dataclass(frozen=True, slots=True)
class SendOperation:
    queue_ids: Sequence[int]
    body: bytes
    receiver: int | None = None
    priority: int = models.DEFAULT_PRIORITY
    context: int | None = None
    delay_ms: int = 0
    ttl_ms: int | None = None
    dedup_id: str | None = None
    properties: models.Properties = field(default_factory=dict, hash=False)
    persistent: bool = True


@dataclass(frozen=True, slots=True)
class PublishOperation:
    topic: int | str
    body: bytes
    receiver: int | None = None
    priority: int = models.DEFAULT_PRIORITY
    context: int | None = None
    delay_ms: int = 0
    ttl_ms: int | None = None
    dedup_id: str | None = None
    properties: models.Properties = field(default_factory=dict, hash=False)
    persistent: bool = True


@dataclass(frozen=True, slots=True)
class AckOperation:
    delivery_id: int


Operation: TypeAlias = SendOperation | PublishOperation | AckOperation

COLUMNS = (
    "kinds", "queue_counts", "topic_ids", "topic_names", "bodies", "receivers",
    "priorities", "contexts", "delays", "ttls", "dedup_ids", "deliveries", "properties",
    "persistent",
)  # fmt: skip


def arguments(operations: Sequence[Operation]) -> tuple[list[Any], ...]:
    """The arrays of courier_commit_v3, from p_kinds to p_persistent, in its order
    (p_queue_ids, the flattened queues, comes third)."""
    columns: dict[str, list[Any]] = {name: [] for name in COLUMNS}
    queue_ids: list[int] = []
    for operation in operations:
        row = _row(operation)
        for name in COLUMNS:
            columns[name].append(row.get(name))
        if isinstance(operation, SendOperation):
            queue_ids += operation.queue_ids
    ordered = [columns[name] for name in COLUMNS]
    return (ordered[0], ordered[1], queue_ids, *ordered[2:])


def _row(operation: Operation) -> dict[str, Any]:
    if isinstance(operation, AckOperation):
        return {"kinds": "ack", "deliveries": operation.delivery_id}
    fields = {
        "bodies": operation.body, "receivers": operation.receiver,
        "priorities": operation.priority, "contexts": operation.context,
        "delays": operation.delay_ms, "ttls": operation.ttl_ms, "dedup_ids": operation.dedup_id,
        "properties": jsonb.dumps(operation.properties),
        "persistent": operation.persistent,
    }  # fmt: skip
    if isinstance(operation, SendOperation):
        return {**fields, "kinds": "send", "queue_counts": len(operation.queue_ids)}
    topic = operation.topic
    topic_id, topic_name = (None, topic) if isinstance(topic, str) else (topic, None)
    return {**fields, "kinds": "publish", "topic_ids": topic_id, "topic_names": topic_name}
