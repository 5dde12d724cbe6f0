"""Where each kind goes: queue and topic names, subscriptions, and the run's map.

A queue is ``<location>.<kind>`` (``dc-000.order``); a topic is the kind's name,
except callForOffers, which has one topic per product family
(``callForOffers.f000``); a subscription is named after its location, so its queue
is ``<topic>:<location>``. Each run directory gets ``destinations.json``: every
queue id of the run with its name, kind and interaction, which the analysis uses
to group delivery times by interaction and to judge each queue's backlog.
"""

from __future__ import annotations

from typing import Any

from courier import models
from courier.lab.supply import delivery, kinds, topology

CALL_FOR_OFFERS = "callForOffers"


def queue_name(location: str, kind: str) -> str:
    return f"{location}.{kind}"


def family_topic(family: int) -> str:
    return f"{CALL_FOR_OFFERS}.f{family:03d}"


def topics(plan: topology.Plan) -> list[str]:
    """Every topic of the plan."""
    names = [family_topic(family) for family in range(plan.families)]
    return names + [kind.name for kind in kinds.KINDS.values() if kind.topic and kind.at != "sp"]


def subscriptions(plan: topology.Plan, location: str, location_type: str) -> list[str]:
    """The topics a location subscribes to: a supplier to two product families."""
    if location_type == "sp":
        index = int(location.rsplit("-", 1)[1])
        chosen = {index % plan.families, (index + 1) % plan.families}
        return [family_topic(family) for family in sorted(chosen)]
    return [kind.name for kind in kinds.kinds_at(location_type) if kind.topic]


def queues(plan: topology.Plan) -> list[str]:
    """Every queue of the plan (subscription queues are made by subscribing)."""
    return [
        queue_name(location, kind.name)
        for location_type in kinds.LOCATION_TYPES
        for location in plan.names(location_type)
        for kind in kinds.kinds_at(location_type)
        if not kind.topic
    ]


def kind_of(name: str) -> str | None:
    """The kind a queue of the benchmark carries, from its name; None for another queue."""
    if ":" in name:
        found = name.split(":", 1)[0].split(".", 1)[0]
    else:
        found = name.split(".", 1)[1] if "." in name else ""
    return found if found in kinds.KINDS else None


def destination_map(queue_list: list[models.Queue]) -> dict[int, dict[str, Any]]:
    """Queue id -> what ``courier.measurements.destinations`` records of it."""
    found = {}
    for queue in queue_list:
        name = kind_of(queue.name)
        if name is not None:
            kind = kinds.KINDS[name]
            found[queue.id] = {
                "name": queue.name,
                "kind": name,
                "interaction": kind.interaction,
                "interaction_name": kinds.INTERACTIONS[kind.interaction],
                "persistent": kind.persistent,
                "ran_persistent": delivery.ran_persistent(kind),
            }
    return found
