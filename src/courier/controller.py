"""The provisioning controller of replicated queues (`courier controller`, docs/nodes.md).

Every round it reads, for each replicated queue, each member's producers and
consumers (the control node), length (the member's node) and production and
consumption rates (the middleware's reported totals), and then:

- **provisions** by the load L = clients / sum of the members' capacities (a
  member's capacity is its node's, else ``Rules.capacity``): above ``Rules.high`` it
  adds a member on a node that has none of this queue; when one member fewer would
  still carry the load below ``Rules.low`` it removes the member with the fewest
  clients, never going below the members the queue was created with. After a
  change nothing changes again for ``Rules.inhibition_s``, so the measurements can
  settle. A member being removed gets no new clients, its messages are moved to the
  others, and its queue goes with its last ones (its clients then join again,
  elsewhere);
- **evens out** the members' lengths: when the longest holds ``Rules.move_above``
  more messages than the shortest member with consumers, or that member is empty
  while its consumers wait, half the difference (at most ``Rules.move_at_most``)
  moves, exactly once (``courier.db.transfers``).

Each decision is logged, kept on the control node (the console shows them) and,
with a recorder, written as a lab record beside a sample of every member each
round, so the analysis can plot decisions against rates.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from courier import errors, models
from courier.db import nodes, pools, repository, routing, transfers
from courier.measurements import record_schema

log = logging.getLogger(__name__)

CONTROLLER_LOCK = 0x636F6E74  # "cont": held by the one controller of a cluster
FORGET_EVERY_ROUNDS = 60
"""How often the targets forget transfer ids older than transfers.KEEP_TRANSFER_IDS_S."""

Recorder = Callable[[str, tuple[Any, ...]], None]
"""Takes a record kind and a row of its fields (``courier.measurements``)."""


class ControllerRunning(errors.CourierError):
    """Another controller already provisions this cluster."""


@dataclass(frozen=True, slots=True)
class Rules:
    capacity: int = 8
    """Clients a member serves well when its node has no capacity of its own."""
    high: float = 1.0
    """Add a member when the load exceeds this."""
    low: float = 0.5
    """Remove a member when the load without it would stay below this."""
    inhibition_s: float = 10.0
    """No change to a queue's members for this long after the last one."""
    move_above: int = 100
    """Even out two members whose lengths differ by more than this."""
    move_at_most: int = 1000
    """Messages moved for one queue in one round."""


@dataclass(frozen=True, slots=True)
class Member:
    """One member as a round sees it; rates in messages per second."""

    replica: models.Replica
    capacity: int
    produced: float = 0.0
    consumed: float = 0.0

    @property
    def clients(self) -> int:
        return self.replica.producers + self.replica.consumers


@dataclass(frozen=True, slots=True)
class Decision:
    kind: str  # add, remove or move
    member: int
    node: int
    moved: int
    clients: int
    capacity: int
    load: float
    length: int


@dataclass(frozen=True, slots=True)
class Load:
    clients: int
    capacity: int
    length: int

    @property
    def value(self) -> float:
        return self.clients / self.capacity if self.capacity else 0.0


def load_of(members: list[Member]) -> Load:
    return Load(
        sum(m.clients for m in members),
        sum(m.capacity for m in members),
        sum(m.replica.length for m in members),
    )


def provision(
    members: list[Member], rules: Rules, free_node: int | None, min_members: int = 1
) -> tuple[str, int] | None:
    """("add", node) or ("remove", member number), or None: what the load asks for.
    A queue keeps at least ``min_members`` (the members it was created with)."""
    found = load_of(members)
    if found.value > rules.high and free_node is not None:
        return "add", free_node
    if len(members) > max(1, min_members):
        leaving = min(members, key=lambda m: (m.clients, -m.replica.member))
        rest = found.capacity - leaving.capacity
        if rest > 0 and found.clients / rest < rules.low:
            return "remove", leaving.replica.member
    return None


def rebalance(members: list[Member], rules: Rules) -> tuple[Member, Member, int] | None:
    """(from, to, count): from the longest member to the shortest one that has
    consumers, half the gap when it is above ``Rules.move_above`` (a flooding member
    pushes), and also when that member is empty (its waiting consumers pull)."""
    if len(members) < 2:
        return None
    longest = max(members, key=lambda m: (m.replica.length, -m.replica.member))
    readers = [m for m in members if m.replica.consumers and m is not longest]
    shortest = min(readers or members, key=lambda m: (m.replica.length, m.replica.member))
    gap = longest.replica.length - shortest.replica.length
    draining = shortest.replica.length == 0 and shortest.replica.consumers > 0
    if gap <= 0 or (gap <= rules.move_above and not draining):
        return None
    return longest, shortest, min((gap + 1) // 2, rules.move_at_most)


@dataclass
class _Queue:
    """What the controller remembers of one replicated queue between rounds (the
    members being removed are on the control node, so a new controller goes on)."""

    changed_at: float = float("-inf")


class Controller:
    def __init__(
        self,
        control_dsn: str,
        rules: Rules = Rules(),
        *,
        recorder: Recorder | None = None,
        run_id: str = "",
    ) -> None:
        self._dsn = control_dsn
        self.rules = rules
        self._recorder = recorder
        self._run_id = run_id
        self._routed: routing.RoutedBackend | None = None
        self._capacities: dict[int, int | None] = {}
        self._queues: dict[str, _Queue] = {}
        self._counts: dict[int, tuple[int, int]] = {}
        self._counted_at = 0.0
        self._lock: Any = None
        self._rounds = 0

    async def start(self) -> None:
        """Connect to every node; ControllerRunning when another controller has the
        cluster (a session lock on the control node, freed when its process ends)."""
        self._lock = await pools.connect(self._dsn)
        if not await self._lock.fetchval("SELECT pg_try_advisory_lock($1)", CONTROLLER_LOCK):
            await self._lock.close()
            raise ControllerRunning("another controller already runs for this cluster")
        try:
            control = await repository.Repository.connect(self._dsn)
            self._routed = routing.RoutedBackend(control)
            await self._link_nodes()
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        if self._routed is not None:
            for node_id in self._routed.node_ids:
                await self._routed.node(node_id).close()
        if self._lock is not None:
            await self._lock.close()

    async def run(self, interval: float, stop: asyncio.Event) -> None:
        """Rounds every ``interval`` seconds until ``stop`` is set."""
        while not stop.is_set():
            try:
                await self.round()
            except ControllerRunning:
                raise  # the lock is gone: another controller may have the cluster now
            except errors.CourierError as exc:
                log.warning("round failed: %s", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval)

    async def round(self) -> list[Decision]:
        """One look at every replicated queue, and what it decided."""
        await self._check_lock()
        routed = self._cluster()
        await self._link_nodes()
        await self._finish_transfers()
        rates = await self._rates()
        decided: list[Decision] = []
        for name, min_members in await routed.control.replicated_names():
            try:
                decided += await self._look_at(name, min_members, rates)
            except errors.QueueNotFound:
                continue  # deleted meanwhile
            except errors.CourierError as exc:  # one queue's trouble does not stop the others
                log.warning("%s: %s", name, exc)
        self._rounds += 1
        if self._rounds % FORGET_EVERY_ROUNDS == 0:
            for node_id in routed.node_ids:
                await routed.node(node_id).forget_transfers(transfers.KEEP_TRANSFER_IDS_S)
        return decided

    async def _check_lock(self) -> None:
        """The lock lives as long as its connection: ControllerRunning once it is gone."""
        try:
            alive = self._lock is not None and await self._lock.fetchval("SELECT true")
        except Exception as exc:  # closed, terminated or out of reach: the lock is lost
            raise ControllerRunning(f"lost the controller lock: {exc}") from exc
        if not alive:
            raise ControllerRunning("lost the controller lock")

    def _cluster(self) -> routing.RoutedBackend:
        assert self._routed is not None, "start() first"
        return self._routed

    async def _link_nodes(self) -> None:
        routed = self._cluster()
        listed = await routed.control.cluster_nodes()
        self._capacities = {node.id: node.capacity for node in listed}
        wanted = {node.id: node for node in nodes.active(listed)}
        for node_id, node in wanted.items():
            if node_id != nodes.CONTROL_NODE and node_id not in routed.node_ids:
                routed.attach(node_id, await repository.Repository.connect(node.dsn))
        for node_id in set(routed.node_ids) - set(wanted) - {nodes.CONTROL_NODE}:
            await pools.close_pool(routed.detach(node_id).pool)

    async def _finish_transfers(self) -> None:
        routed = self._cluster()
        finder = transfers.node_of({node_id: routed.node(node_id) for node_id in routed.node_ids})
        for node_id in routed.node_ids:
            finished = await transfers.finish_pending(routed.node(node_id), finder)
            if finished:
                log.info("finished an interrupted transfer of %d message(s)", finished)

    async def _rates(self) -> dict[int, tuple[float, float]]:
        """Messages per second stored in and taken from each member since the last round."""
        counts = await self._cluster().control.member_counts()
        now = time.monotonic()
        elapsed = now - self._counted_at
        rates = {}
        for queue, (sent, taken) in counts.items():
            before = self._counts.get(queue, (sent, taken))
            rates[queue] = ((sent - before[0]) / elapsed, (taken - before[1]) / elapsed)
        self._counts, self._counted_at = counts, now
        return rates

    async def _look_at(
        self, name: str, min_members: int, rates: dict[int, tuple[float, float]]
    ) -> list[Decision]:
        routed = self._cluster()
        queue = self._queues.setdefault(name, _Queue())
        found = await routed.get_replicated_queue(name)
        draining = await self._drain(found)
        members = [
            Member(r, self._capacity_of(r.node), *rates.get(r.queue, (0.0, 0.0)))
            for r in found.members
        ]
        self._sample(name, members)
        decided: list[Decision] = []
        now = time.monotonic()
        if now - queue.changed_at >= self.rules.inhibition_s:
            taken = {m.replica.node for m in members} | {r.node for r in draining}
            free = [n for n in sorted(routed.node_ids) if n not in taken]
            wanted = provision(members, self.rules, free[0] if free else None, min_members)
            if wanted is not None:
                decided.append(await self._change(found, members, *wanted))
                queue.changed_at = now
        moving = rebalance(members, self.rules)
        if moving is not None and not decided:
            moved = await self._move(members, *moving)
            if moved.moved:  # others' readers may have taken them all meanwhile
                decided.append(moved)
        for decision in decided:
            await self._record(name, decision)
        return decided

    async def _change(
        self,
        found: models.ReplicatedQueue,
        members: list[Member],
        kind: str,
        target: int,
    ) -> Decision:
        routed = self._cluster()
        before = load_of(members)
        if kind == "add":
            member, owner = await routed.control.next_member(found.id)
            made = await routed.create_queue_on(target, f"{found.name}#{member}", owner)
            replica = models.Replica(member, made.id, made.name, target)
            await routed.control.add_replica(found.id, replica)
            node = target
            after = Load(before.clients, before.capacity + self._capacity_of(target), before.length)
        else:
            leaving = next(m for m in members if m.replica.member == target)
            await routed.control.remove_replica(found.id, target)
            member, node = target, leaving.replica.node
            after = Load(before.clients, before.capacity - leaving.capacity, before.length)
        return Decision(
            kind, member, node, 0, after.clients, after.capacity, after.value, after.length
        )

    def _capacity_of(self, node: int) -> int:
        return self._capacities.get(node) or self.rules.capacity

    async def _drain(self, found: models.ReplicatedQueue) -> list[models.Replica]:
        """Move what each removed member still holds to the shortest member left; its
        queue goes in the same transaction as its last messages (then its clients join
        again, elsewhere). Returns the members still draining."""
        routed = self._cluster()
        draining = await routed.control.draining_replicas(found.id)
        left = []
        for replica in draining:
            target = min(found.members, key=lambda r: r.length, default=None)
            if target is None:
                left.append(replica)  # nowhere to go yet
                continue
            moved, dropped = await transfers.drain(
                routed.node(replica.node), routed.node(target.node), replica.queue, target.queue
            )
            if dropped:
                await routed.control.drop_replica(found.id, replica.member)
                if replica.node != nodes.CONTROL_NODE:  # node 1's own delete frees its name
                    await routed.control.release_queue_home(replica.queue_name, replica.node)
                log.info("%s: member %d drained (%d moved) and deleted",
                         found.name, replica.member, moved)  # fmt: skip
            else:
                left.append(replica)
        return left

    async def _move(
        self, members: list[Member], source: Member, target: Member, count: int
    ) -> Decision:
        routed = self._cluster()
        moved = await transfers.move(
            routed.node(source.replica.node), routed.node(target.replica.node),
            source.replica.queue, target.replica.queue, count,
        )  # fmt: skip
        found = load_of(members)
        return Decision(
            "move", source.replica.member, target.replica.node, moved, found.clients,
            found.capacity, found.value, found.length,
        )  # fmt: skip

    async def _record(self, name: str, decision: Decision) -> None:
        log.info(
            "%s: %s member %d (node %d), moved %d; %d clients, capacity %d, load %.2f, length %d",
            name, decision.kind, decision.member, decision.node, decision.moved,
            decision.clients, decision.capacity, decision.load, decision.length,
        )  # fmt: skip
        await self._cluster().control.record_decision(name, decision)
        if self._recorder is not None:
            self._recorder(
                record_schema.CLUSTER_DECISIONS,
                (self._run_id, time.time_ns(), name, decision.kind, decision.member,
                 decision.node, decision.moved, decision.clients, decision.capacity,
                 decision.load, decision.length),
            )  # fmt: skip

    def _sample(self, name: str, members: list[Member]) -> None:
        if self._recorder is None:
            return
        now = time.time_ns()
        for m in members:
            r = m.replica
            self._recorder(
                record_schema.REPLICA_SAMPLES,
                (self._run_id, now, name, r.member, r.queue, r.node, r.producers, r.consumers,
                 r.length, m.produced, m.consumed, m.capacity),
            )  # fmt: skip
