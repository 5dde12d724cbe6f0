"""The benchmark's message kinds, interactions and locations.

Each kind has one destination: a queue at a location (``sm``, ``dc``, ``sp``, ``hq``)
or a topic whose subscribers are locations of one type. Persistent kinds are sent
durably; transactional kinds are sent inside a transaction (with the ack of the
message that caused them, when a handler sends them).
"""

from __future__ import annotations

from dataclasses import dataclass

LOCATION_TYPES = ("sm", "dc", "sp", "hq")
"""Supermarkets, distribution centres, suppliers, headquarters."""

INTERACTIONS = {
    1: "orders",
    2: "purchases",
    3: "price_updates",
    4: "inventory",
    5: "sales_stats",
    6: "product_announcements",
    7: "credit_card_hotlist",
}
"""Interaction number -> the name its rate has in a spec's [rates] table."""

STARTED_AT = {
    "orders": "sm",
    "purchases": "dc",
    "price_updates": "hq",
    "inventory": "sm",
    "sales_stats": "sm",
    "product_announcements": "hq",
    "credit_card_hotlist": "hq",
}
"""Which location type's driver starts each interaction."""


@dataclass(frozen=True, slots=True)
class Kind:
    """One message kind: its interaction and where it goes."""

    name: str
    interaction: int
    at: str  # location type holding the queue, or subscribing to the topic
    topic: bool = False
    durable: bool = True  # topics: durable subscriptions
    persistent: bool = True
    transactional: bool = True


def _queue(name: str, interaction: int, at: str, *, persistent: bool = True) -> Kind:
    return Kind(name, interaction, at, persistent=persistent, transactional=persistent)


def _topic(name: str, interaction: int, at: str, *, persistent: bool) -> Kind:
    return Kind(
        name, interaction, at, topic=True, durable=persistent,
        persistent=persistent, transactional=persistent,
    )  # fmt: skip


KINDS: dict[str, Kind] = {
    kind.name: kind
    for kind in (
        _queue("order", 1, "dc"),
        _queue("orderConf", 1, "sm"),
        _queue("shipDep", 1, "dc"),
        _queue("statInfoOrderDC", 1, "hq", persistent=False),
        _queue("shipInfo", 1, "sm"),
        _queue("shipConf", 1, "dc"),
        _topic("callForOffers", 2, "sp", persistent=True),
        _queue("offer", 2, "dc"),
        _queue("pOrder", 2, "sp"),
        _queue("pOrderConf", 2, "dc"),
        _queue("invoice", 2, "hq"),
        _queue("pShipInfo", 2, "dc"),
        _queue("pShipConf", 2, "sp"),
        _queue("statInfoShipDC", 2, "hq", persistent=False),
        _topic("priceUpdate", 3, "sm", persistent=True),
        _queue("inventoryInfo", 4, "sm"),
        _queue("statInfoSM", 5, "hq", persistent=False),
        _topic("productAnnouncement", 6, "sm", persistent=False),
        _topic("creditCardHL", 7, "sm", persistent=False),
    )
}
"""Every kind: persistent kinds are transactional, non-persistent ones are not; the
non-persistent topics have non-durable subscriptions."""


def kinds_at(location_type: str) -> list[Kind]:
    """The kinds a location of this type consumes (its queues and subscriptions)."""
    return [kind for kind in KINDS.values() if kind.at == location_type]
