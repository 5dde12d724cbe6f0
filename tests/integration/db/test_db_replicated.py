"""Replicated queues over two database nodes: members, the balancer, places that end."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator

import pytest

from courier import errors, models
from courier.db import nodes, routing
from helpers.cluster import two_nodes

P, C = models.Role.PRODUCER, models.Role.CONSUMER


@pytest.fixture
async def routed(dsn: str, empty_dsn: str) -> AsyncIterator[routing.RoutedBackend]:
    async with two_nodes(dsn, empty_dsn) as backend:
        yield backend


async def clients(routed: routing.RoutedBackend, count: int) -> tuple[int, list[int]]:
    """An instance, and ``count`` clients logged in through it."""
    instance = (await routed.control.register_instance("127.0.0.1:1")).id
    ids = []
    for n in range(count):
        client = await routed.register_client(f"c{n}")
        await routed.login(client.id, instance)
        ids.append(client.id)
    return instance, ids


def shares(places: list[tuple[models.Role, models.Place]]) -> dict[tuple[int, str], int]:
    """How many producers and consumers each member was given."""
    return dict(Counter((place.member, str(role)) for role, place in places))


async def test_members_live_on_distinct_nodes(routed: routing.RoutedBackend) -> None:
    created = await routed.create_replicated_queue("orders", 2)
    assert [(m.member, m.queue_name, m.node) for m in created.members] == [
        (1, "orders#1", 1),
        (2, "orders#2", 2),
    ]
    assert [nodes.node_of(m.queue) for m in created.members] == [1, 2]
    with pytest.raises(errors.QueueExists):
        await routed.create_replicated_queue("orders", 2)
    with pytest.raises(errors.BadRequest, match="3 members needs as many nodes; the cluster has 2"):
        await routed.create_replicated_queue("wide", 3)
    with pytest.raises(errors.QueueNotFound):  # nothing of the refused one was kept
        await routed.get_replicated_queue("wide")
    assert {q.name for q in await routed.list_queues()} == {"orders#1", "orders#2"}


async def test_the_balanced_policy_gives_each_member_an_equal_share_of_each_role(
    routed: routing.RoutedBackend,
) -> None:
    # The arrival order that defeats round robin: producers and consumers alternate.
    arrivals = [P, C] * 4 + [C] * 4  # 4 producers, 8 consumers, as in the study
    await routed.create_replicated_queue("balanced", 2)
    await routed.create_replicated_queue("turns", 2, policy=models.Policy.ROUND_ROBIN)
    instance, ids = await clients(routed, len(arrivals))
    balanced = [
        (role, await routed.join_replicated("balanced", client, instance, role))
        for client, role in zip(ids, arrivals, strict=True)
    ]
    turns = [
        (role, await routed.join_replicated("turns", client, instance, role))
        for client, role in zip(ids, arrivals, strict=True)
    ]
    # x_i = y_i = 1/2: two producers and four consumers on each member.
    assert shares(balanced) == {(1, "producer"): 2, (1, "consumer"): 4,
                                (2, "producer"): 2, (2, "consumer"): 4}  # fmt: skip
    # Round robin by arrival: 1, 2, 1, 2, ... whatever the role.
    assert shares(turns) == {(1, "producer"): 4, (1, "consumer"): 2, (2, "consumer"): 6}
    found = await routed.get_replicated_queue("balanced")
    assert [(m.producers, m.consumers) for m in found.members] == [(2, 4), (2, 4)]


async def test_a_place_ends_when_left_and_when_the_session_ends(
    routed: routing.RoutedBackend,
) -> None:
    await routed.create_replicated_queue("q", 2)
    instance, (alice, bob) = await clients(routed, 2)
    first = await routed.join_replicated("q", alice, instance, P)
    await routed.join_replicated("q", bob, instance, P)
    await routed.join_replicated("q", bob, instance, C)
    assert await routed.leave_replicated(first.id, bob) is False  # not bob's to leave
    assert await routed.leave_replicated(first.id, alice) is True
    assert await routed.leave_replicated(first.id, alice) is False
    counts = [(m.producers, m.consumers) for m in (await routed.get_replicated_queue("q")).members]
    # bob's consumer went to member 1 (a tie of producers; the lower number), where
    # alice's producer no longer is.
    assert counts == [(0, 1), (1, 0)]
    await routed.logout(bob, instance)
    counts = [(m.producers, m.consumers) for m in (await routed.get_replicated_queue("q")).members]
    assert counts == [(0, 0), (0, 0)]
    carol = await routed.join_replicated("q", alice, instance, C)
    await routed.control.unregister_instance(instance)  # its middleware is gone
    assert await routed.leave_replicated(carol.id, alice) is False


async def test_messages_stay_in_their_member_and_lengths_are_reported(
    routed: routing.RoutedBackend,
) -> None:
    await routed.create_replicated_queue("q", 2)
    instance, (alice,) = await clients(routed, 1)
    producer = await routed.join_replicated("q", alice, instance, P)
    consumer = await routed.join_replicated("q", alice, instance, C)
    assert producer.member == consumer.member  # the tie goes to the member with a producer
    await routed.send(alice, [producer.queue], b"one")
    await routed.send(alice, [producer.queue], b"two")
    found = await routed.get_replicated_queue("q")
    assert {m.member: m.length for m in found.members} == {
        producer.member: 2,
        3 - producer.member: 0,
    }
    popped = await routed.read(alice, queue_id=consumer.queue, pop=True)
    assert popped.body == b"one"


async def test_deleting_a_replicated_queue_frees_every_name(routed: routing.RoutedBackend) -> None:
    created = await routed.create_replicated_queue("q", 2)
    await routed.send((await routed.register_client("a")).id, [created.members[1].queue], b"x")
    await routed.delete_replicated_queue("q")
    with pytest.raises(errors.QueueNotFound):
        await routed.get_replicated_queue("q")
    assert await routed.list_queues() == []
    assert len((await routed.create_replicated_queue("q", 2)).members) == 2


async def test_a_join_needs_a_live_session_and_a_queue_with_members(
    routed: routing.RoutedBackend,
) -> None:
    await routed.create_replicated_queue("q", 2)
    instance, (alice,) = await clients(routed, 1)
    await routed.logout(alice, instance)
    with pytest.raises(errors.NotLoggedIn):
        await routed.join_replicated("q", alice, instance, P)
    await routed.login(alice, instance)
    hollow = await routed.control.create_replicated("hollow", models.Policy.ROUND_ROBIN, None, 1)
    with pytest.raises(errors.QueueNotFound):  # made, but no member yet
        await routed.join_replicated("hollow", alice, instance, P)
    assert hollow > 0


async def test_only_the_owner_or_an_admin_deletes_a_replicated_queue(
    routed: routing.RoutedBackend,
) -> None:
    owner = await routed.register_client("owner")
    other = await routed.register_client("other")
    await routed.create_replicated_queue("q", 2, creator=owner.id)
    with pytest.raises(errors.NotAuthorised):
        await routed.delete_replicated_queue("q", actor=other.id)
    assert len((await routed.get_replicated_queue("q")).members) == 2  # nothing went
    await routed.delete_replicated_queue("q", actor=owner.id)
    with pytest.raises(errors.QueueNotFound):
        await routed.get_replicated_queue("q")
    assert await routed.list_queues() == []
