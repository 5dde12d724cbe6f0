"""Topic rows from the stored functions of migration 0015 into ``courier.models``.

``courier_topics_v1`` answers one row per subscription (a topic without any is one
row whose subscription columns are NULL), ordered by topic, then queue.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from courier import models


def topics(rows: Iterable[Any]) -> list[models.Topic]:
    """The rows grouped into topics, in the rows' order."""
    grouped: dict[int, tuple[str, list[models.Subscription]]] = {}
    for row in rows:
        _, subscriptions = grouped.setdefault(row["topic_id"], (row["topic_name"], []))
        if row["queue_id"] is not None:
            subscriptions.append(listed_subscription(row))
    return [
        models.Topic(topic_id, name, tuple(subscriptions))
        for topic_id, (name, subscriptions) in grouped.items()
    ]


def listed_subscription(row: Any) -> models.Subscription:
    return models.Subscription(
        queue=row["queue_id"],
        queue_name=row["queue_name"],
        topic=row["topic_id"],
        name=row["name"],
        durable=row["durable"],
        subscriber=row["subscriber_id"],
        backlog=row["backlog"],
    )


def subscription(row: Any) -> models.Subscription:
    """A subscription as courier_subscribe_v1 answers it (its backlog is not counted)."""
    return models.Subscription(
        queue=row["queue_id"],
        queue_name=row["queue_name"],
        topic=row["topic_id"],
        name=row["name"],
        durable=row["durable"],
        subscriber=row["subscriber_id"],
    )
