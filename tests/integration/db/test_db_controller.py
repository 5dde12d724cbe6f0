"""The controller over two database nodes: it adds a member when the load passes the
capacity, evens the members out, and drains and removes one when the load falls."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from courier import controller, errors, models
from courier.db import nodes, repository, routing
from courier.measurements import record_schema

P, C = models.Role.PRODUCER, models.Role.CONSUMER
RULES = controller.Rules(capacity=4, high=1.0, low=0.5, inhibition_s=0, move_above=50)


@dataclass
class Rig:
    routed: routing.RoutedBackend
    controller: controller.Controller
    instance: int
    records: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)
    joined: int = 0

    async def join(self, count: int, role: models.Role) -> list[models.Place]:
        places = []
        for _ in range(count):
            self.joined += 1
            client = await self.routed.register_client(f"client-{self.joined}")
            await self.routed.login(client.id, self.instance)
            places.append(await self.routed.join_replicated("q", client.id, self.instance, role))
        return places


@pytest.fixture
async def rig(dsn: str, empty_dsn: str) -> AsyncIterator[Rig]:
    await nodes.add_node(dsn, empty_dsn)
    control = await repository.Repository.connect(dsn)
    second = await repository.Repository.connect(empty_dsn)
    routed = routing.RoutedBackend(control)
    routed.attach(2, second)
    await routed.create_replicated_queue("q", 1)
    instance = (await control.register_instance("127.0.0.1:1")).id
    records: list[tuple[str, tuple[Any, ...]]] = []
    running = controller.Controller(
        dsn, RULES, recorder=lambda kind, row: records.append((kind, row)), run_id="r1"
    )
    await running.start()
    try:
        yield Rig(routed, running, instance, records)
    finally:
        await running.close()
        await control.close()
        await second.close()


def kinds(decisions: list[controller.Decision]) -> list[str]:
    return [decision.kind for decision in decisions]


async def test_a_member_is_added_on_the_free_node_when_the_load_passes_the_capacity(
    rig: Rig,
) -> None:
    await rig.join(2, P)
    await rig.join(2, C)
    assert await rig.controller.round() == []  # 4 clients on 4: a load of 1.0
    await rig.join(1, C)
    [added] = await rig.controller.round()
    assert (added.kind, added.member, added.node, added.capacity) == ("add", 2, 2, 8)
    assert added.load == 5 / 8
    found = await rig.routed.get_replicated_queue("q")
    assert [(m.member, m.node, m.queue_name) for m in found.members] == [
        (1, 1, "q#1"), (2, 2, "q#2"),
    ]  # fmt: skip
    newcomer = (await rig.join(1, P))[0]
    assert newcomer.member == 2  # the balancer fills the new member
    samples = [row for kind, row in rig.records if kind == record_schema.REPLICA_SAMPLES]
    decisions = [row for kind, row in rig.records if kind == record_schema.CLUSTER_DECISIONS]
    assert len(decisions) == 1 and decisions[0][3] == "add"
    assert all(
        len(row) == len(record_schema.FIELDS[record_schema.REPLICA_SAMPLES]) for row in samples
    )


async def test_a_long_member_gives_half_the_gap_to_a_short_one(rig: Rig) -> None:
    await rig.join(5, P)  # over capacity: the first round adds member 2
    assert kinds(await rig.controller.round()) == ["add"]
    first = (await rig.routed.get_replicated_queue("q")).members[0]
    sender = (await rig.routed.register_client("sender")).id
    for n in range(120):
        await rig.routed.send(sender, [first.queue], f"m{n}".encode())
    [moved] = await rig.controller.round()
    assert (moved.kind, moved.member, moved.moved) == ("move", 1, 60)
    lengths = [m.length for m in (await rig.routed.get_replicated_queue("q")).members]
    assert lengths == [60, 60]


async def test_a_member_not_needed_is_drained_into_the_others_and_removed(rig: Rig) -> None:
    places = await rig.join(5, P)
    assert kinds(await rig.controller.round()) == ["add"]
    second = (await rig.routed.get_replicated_queue("q")).members[1]
    sender = (await rig.routed.register_client("sender")).id
    for n in range(30):
        await rig.routed.send(sender, [second.queue], f"m{n}".encode())
    for place in places[1:]:  # four leave: 1 client on a capacity of 8
        await rig.routed.control.leave_replicated(place.id, await _owner(rig, place))
    [removed] = await rig.controller.round()
    assert (removed.kind, removed.member, removed.node) == ("remove", 2, 2)
    assert [m.member for m in (await rig.routed.get_replicated_queue("q")).members] == [1]
    await rig.controller.round()  # the drain: messages move, then the queue goes
    await rig.controller.round()
    with pytest.raises(errors.QueueNotFound):
        await rig.routed.get_queue(second.queue)
    [left] = (await rig.routed.get_replicated_queue("q")).members
    assert left.length == 30  # every message of the removed member, none twice


async def _owner(rig: Rig, place: models.Place) -> int:
    rows = await rig.routed.control.pool.fetch(
        "SELECT client_id FROM courier_replica_clients WHERE id = $1", place.id
    )
    owner: int = rows[0]["client_id"]
    return owner


async def test_a_second_controller_for_the_same_cluster_is_refused(rig: Rig, dsn: str) -> None:
    second = controller.Controller(dsn, RULES)
    with pytest.raises(controller.ControllerRunning, match="another controller"):
        await second.start()
    await second.close()


async def test_a_new_controller_finishes_a_drain_and_the_owner_deletes_what_it_grew(
    rig: Rig, dsn: str
) -> None:
    owner = await rig.routed.register_client("owner")
    await rig.routed.create_replicated_queue("grown", 1, creator=owner.id)
    await rig.routed.delete_replicated_queue("q")  # only "grown" from here on
    places = []
    for n in range(5):
        client = await rig.routed.register_client(f"p{n}")
        await rig.routed.login(client.id, rig.instance)
        places.append(
            (client.id, await rig.routed.join_replicated("grown", client.id, rig.instance, P))
        )
    assert kinds(await rig.controller.round()) == ["add"]
    added = (await rig.routed.get_replicated_queue("grown")).members[1]
    for n in range(7):
        await rig.routed.send(owner.id, [added.queue], f"m{n}".encode())
    for client, place in places[1:]:
        await rig.routed.leave_replicated(place.id, client)
    await rig.controller.close()  # this controller stops before it could drain
    successor = controller.Controller(dsn, RULES)
    await successor.start()
    try:
        assert kinds(await successor.round()) == ["remove"]
        await successor.round()  # the drain: everything moves, the member's queue goes
    finally:
        await successor.close()
    with pytest.raises(errors.QueueNotFound):
        await rig.routed.get_queue(added.queue)
    [left] = (await rig.routed.get_replicated_queue("grown")).members
    assert left.length == 7
    await rig.routed.delete_replicated_queue("grown", actor=owner.id)  # the owner's, grown too


async def test_a_controller_that_lost_its_lock_stops(rig: Rig, dsn: str) -> None:
    killer = await repository.Repository.connect(dsn)
    try:
        await killer.pool.execute(
            "SELECT pg_terminate_backend(l.pid) FROM pg_locks l"
            " WHERE l.locktype = 'advisory' AND l.objid = $1",
            controller.CONTROLLER_LOCK,
        )
    finally:
        await killer.close()
    with pytest.raises(controller.ControllerRunning, match="lost the controller lock"):
        await rig.controller.round()
