"""The message mix a plan produces: messages per second by class.

A pub/sub message counts once per copy (per subscription it reaches); classes are
point-to-point or pub/sub, persistent or not. The target mix (docs/lab.md) is half
point-to-point, half of those persistent, and a quarter of the pub/sub persistent.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from courier.lab.supply import kinds, topology

TARGET = {"p2p_share": 0.5, "p2p_persistent_share": 0.5, "pubsub_persistent_share": 0.25}


def per_interaction(plan: topology.Plan) -> dict[str, Counter[str]]:
    """Messages of each kind one interaction of each name carries."""
    offers = plan.offers_per_call()
    sms = plan.locations["sm"]
    orders = Counter(order=1, orderConf=1, shipDep=1, statInfoOrderDC=1, shipInfo=1, shipConf=1)
    purchases = Counter(
        callForOffers=offers, offer=offers, pOrder=1, pOrderConf=1, invoice=1,
        pShipInfo=1, pShipConf=1, statInfoShipDC=1,
    )  # fmt: skip
    return {
        "orders": orders,
        "purchases": purchases,
        "price_updates": Counter(priceUpdate=sms),
        "inventory": Counter(inventoryInfo=1),
        "sales_stats": Counter(statInfoSM=1),
        "product_announcements": Counter(productAnnouncement=sms),
        "credit_card_hotlist": Counter(creditCardHL=sms),
    }


def kinds_per_second(plan: topology.Plan) -> dict[str, float]:
    """Expected messages per second of each kind at the plan's locations and rates."""
    found: dict[str, float] = dict.fromkeys(kinds.KINDS, 0.0)
    for interaction, carried in per_interaction(plan).items():
        starts = plan.rates[interaction] * plan.locations[kinds.STARTED_AT[interaction]]
        for kind, count in carried.items():
            found[kind] += starts * count
    return found


@dataclass(frozen=True, slots=True)
class Mix:
    p2p_persistent: float
    p2p_other: float
    pubsub_persistent: float
    pubsub_other: float

    @property
    def total(self) -> float:
        return self.p2p_persistent + self.p2p_other + self.pubsub_persistent + self.pubsub_other

    def shares(self) -> dict[str, float]:
        p2p = self.p2p_persistent + self.p2p_other
        pubsub = self.pubsub_persistent + self.pubsub_other
        return {
            "p2p_share": p2p / self.total if self.total else 0.0,
            "p2p_persistent_share": self.p2p_persistent / p2p if p2p else 0.0,
            "pubsub_persistent_share": self.pubsub_persistent / pubsub if pubsub else 0.0,
        }


def of(plan: topology.Plan) -> Mix:
    classes: dict[tuple[bool, bool], float] = dict.fromkeys(
        [(False, True), (False, False), (True, True), (True, False)], 0.0
    )
    for name, rate in kinds_per_second(plan).items():
        kind = kinds.KINDS[name]
        classes[(kind.topic, kind.persistent)] += rate
    return Mix(classes[(False, True)], classes[(False, False)], classes[(True, True)],
               classes[(True, False)])  # fmt: skip
