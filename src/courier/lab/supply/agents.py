"""The locations' event handlers and drivers.

Each location is one agent with one client (requests are pipelined on its
connection). Its *handlers* take messages from its queues and subscriptions, one
closed loop per handler, and send what the interaction prescribes next: for a
transactional kind, the follow-ups and the ack of the message are one transaction
(``FOLLOW_UPS``); non-transactional kinds are taken without a lease and their
follow-ups sent on their own. Its *drivers* start the interactions that begin at
its type of location, at Poisson arrivals with the plan's rate.

Follow-ups find their destination through the message's properties: every agent
adds ``<its type> = <its name>`` to the properties it passes on, so a distribution
centre answering an order knows the supermarket that sent it.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass

from courier import models
from courier.client import AsyncClient
from courier.client.transactions import Transaction
from courier.lab import driver, workloads
from courier.lab.supply import delivery, destinations, kinds, topology

WAIT_S = 1.0
"""Longest a handler's receive waits, so a run ends promptly."""
LEASE_S = 30.0
HQ = "hq-000"

FOLLOW_UPS: dict[str, tuple[tuple[str, str], ...]] = {
    "order": (("orderConf", "sm"), ("shipDep", "dc"), ("statInfoOrderDC", "hq")),
    "shipDep": (("shipInfo", "sm"),),
    "shipInfo": (("shipConf", "dc"),),
    "callForOffers": (("offer", "dc"),),
    "offer": (("pOrder", "sp"),),
    "pOrder": (("pOrderConf", "dc"), ("invoice", "hq"), ("pShipInfo", "dc")),
    "pShipInfo": (("pShipConf", "sp"), ("statInfoShipDC", "hq")),
}
"""Kind taken -> (kind sent, type of the location it goes to), in order. Kinds not
listed end their interaction."""

STARTS: dict[str, tuple[str, str | None]] = {
    "orders": ("order", "dc"),
    "purchases": ("callForOffers", None),
    "price_updates": ("priceUpdate", None),
    "inventory": ("inventoryInfo", "self"),
    "sales_stats": ("statInfoSM", "hq"),
    "product_announcements": ("productAnnouncement", None),
    "credit_card_hotlist": ("creditCardHL", None),
}
"""Interaction -> the kind that starts it and where it goes (None: its topic; "dc": a
random distribution centre)."""


@dataclass(frozen=True)
class World:
    """What every agent knows: the plan, body sizes and handlers per kind."""

    plan: topology.Plan
    sizes: Mapping[str, topology.Sizes]
    handlers: Mapping[str, int]


class Agent:
    """One location: its client, handlers and drivers."""

    def __init__(
        self,
        name: str,
        location_type: str,
        client: AsyncClient,
        world: World,
        seed: str,
        tally: driver.Tally,
    ) -> None:
        self.name = name
        self.type = location_type
        self.client = client
        self.world = world
        self.rng = random.Random(seed)
        self.tally = tally  # requests counted by its client's recorder
        self._offers_taken: set[str] = set()
        self._serial = itertools.count()
        self._bodies: dict[int, str] = {}

    async def subscribe(self) -> None:
        """Subscribe to the location's topics (before the load starts)."""
        for topic in destinations.subscriptions(self.world.plan, self.name, self.type):
            kind = kinds.KINDS[topic.split(".", 1)[0]]
            await self.client.subscribe(topic, durable=kind.durable, name=self.name)

    def consumed(self) -> list[tuple[kinds.Kind, str]]:
        """Each kind this location takes, with the queue it takes it from."""
        found = []
        for kind in kinds.kinds_at(self.type):
            if kind.topic:
                for topic in destinations.subscriptions(self.world.plan, self.name, self.type):
                    if topic.split(".", 1)[0] == kind.name:
                        found.append((kind, f"{topic}:{self.name}"))
            else:
                found.append((kind, destinations.queue_name(self.name, kind.name)))
        return found

    async def run(self, stop_at: float) -> None:
        """Every handler and driver of the location until ``stop_at`` (monotonic)."""
        closed = driver.Pacing(stop_at)
        loops = [
            driver.drive(self, _handler(kind, queue), closed, self.tally)
            for kind, queue in self.consumed()
            for _ in range(self.world.handlers[kind.name])
        ]
        for interaction, rate in self.world.plan.rates.items():
            if kinds.STARTED_AT[interaction] == self.type and rate > 0:
                paced = driver.Pacing(stop_at, rate=rate)
                loops.append(driver.drive(self, _starter(interaction), paced, self.tally))
        await asyncio.gather(*loops)

    def body(self, kind: str) -> str:
        size = self.world.sizes[kind].sample(self.rng)
        if size not in self._bodies:
            self._bodies[size] = workloads.message_body(size)
        return self._bodies[size]

    def where(self, kind: kinds.Kind, to: str | None, properties: models.Properties) -> str:
        """The destination of a message of ``kind`` to a location of type ``to``."""
        if kind.topic:
            family = self.rng.randrange(self.world.plan.families)
            return destinations.family_topic(family) if kind.at == "sp" else kind.name
        if to == "hq":
            location = HQ
        elif to == "self" or to == self.type:
            location = self.name
        elif to in properties:
            location = str(properties[str(to)])
        else:
            location = self.rng.choice(self.world.plan.names(str(to)))
        return destinations.queue_name(location, kind.name)

    def first_offer(self, message: models.Message) -> bool:
        """Whether this offer is the first for its call for offers (the one ordered)."""
        call = str(message.properties.get("call", ""))
        if call in self._offers_taken:
            return False
        self._offers_taken.add(call)
        return True

    def reference(self) -> str:
        return f"{self.name}/{next(self._serial)}"


def _handler(kind: kinds.Kind, queue: str) -> Callable[[Agent], Awaitable[None]]:
    lease = LEASE_S if kind.transactional else None

    async def take(agent: Agent) -> None:
        message = await agent.client.receive(queue, timeout=WAIT_S, lease=lease)
        if message is not None:
            await handle(agent, kind, message)

    return take


async def handle(agent: Agent, kind: kinds.Kind, message: models.Message) -> None:
    """Send the follow-ups of ``message`` and settle it: the transactional follow-ups
    and the ack in one transaction, the others after it."""
    follow_ups = FOLLOW_UPS.get(kind.name, ())
    if kind.name == "offer" and not agent.first_offer(message):
        follow_ups = ()  # only the first offer for a call is ordered
    properties = {**message.properties, agent.type: agent.name}
    if not kind.transactional:
        await _send_all(agent, follow_ups, properties)
        return
    atomic = [(name, to) for name, to in follow_ups if kinds.KINDS[name].transactional]
    async with agent.client.transaction() as tx:
        await _send_all(agent, atomic, properties, tx)
        tx.ack(message)
    await _send_all(agent, [step for step in follow_ups if step not in atomic], properties)


async def _send_all(
    agent: Agent,
    steps: Iterable[tuple[str, str | None]],
    properties: models.Properties,
    tx: Transaction | None = None,
) -> None:
    for name, to in steps:
        kind = kinds.KINDS[name]
        where = agent.where(kind, to, properties)
        await delivery.deliver(agent.client, kind, where, agent.body(name), properties, tx)


def _starter(interaction: str) -> Callable[[Agent], Awaitable[None]]:
    name, to = STARTS[interaction]
    step = [(name, to)]

    async def start(agent: Agent) -> None:
        properties = {agent.type: agent.name, "call": agent.reference()}
        if kinds.KINDS[name].transactional:
            async with agent.client.transaction() as tx:
                await _send_all(agent, step, properties, tx)
        else:
            await _send_all(agent, step, properties)

    return start
