"""A cluster of two database nodes: adding and removing nodes, and routed requests.

The nodes are two databases of the test server, each a complete Courier database
reached by its own DSN, as two servers would be.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import asyncpg
import pytest

from courier import errors
from courier.db import nodes, repository, routing
from helpers import dsns

if TYPE_CHECKING:
    from conftest import TestDatabases  # the shared fixture's type (tests/conftest.py)

SECOND = 1 << nodes.ID_BITS  # node 2's ids start just above


@dataclass
class Cluster:
    control: repository.Repository
    second: repository.Repository
    routed: routing.RoutedBackend


@pytest.fixture
async def cluster(dsn: str, empty_dsn: str) -> AsyncIterator[Cluster]:
    await nodes.add_node(dsn, empty_dsn, capacity=8)
    control = await repository.Repository.connect(dsn)
    second = await repository.Repository.connect(empty_dsn)
    routed = routing.RoutedBackend(control)
    routed.attach(2, second)
    try:
        yield Cluster(control, second, routed)
    finally:
        await control.close()
        await second.close()


async def test_a_node_joins_with_ids_of_its_own_and_the_clients_copied(
    dsn: str, empty_dsn: str
) -> None:
    control = await repository.Repository.connect(dsn)
    try:
        alice = await control.register_client("alice")
        added = await nodes.add_node(dsn, empty_dsn, capacity=8)
        assert (added.id, added.capacity, added.state) == (2, 8, "active")
        listed = await nodes.list_nodes(dsn)
        assert [(node.id, node.dsn, node.state) for node in listed] == [
            (1, dsn, "active"),
            (2, empty_dsn, "active"),
        ]
        second = await repository.Repository.connect(empty_dsn)
        try:
            assert (await second.get_client("alice")).id == alice.id
            queue = await second.create_queue("on-two")
            assert nodes.node_of(queue.id) == 2 and queue.id == SECOND + 1
            [message_id] = await second.send(alice.id, [queue.id], b"x")
            assert nodes.node_of(message_id) == 2
        finally:
            await second.close()
    finally:
        await control.close()


async def test_a_database_in_use_cannot_join_and_a_node_is_added_once(
    dsn: str, empty_dsn: str, databases: TestDatabases, template_database: str
) -> None:
    with databases.copy(template_database) as used:
        connection = await asyncpg.connect(used)
        await connection.execute("SELECT courier_create_queue_v1('taken')")
        await connection.close()
        with pytest.raises(nodes.NodeError, match="only an empty Courier database"):
            await nodes.add_node(dsn, used)
    await nodes.add_node(dsn, empty_dsn)
    with pytest.raises(nodes.NodeError, match="already a node"):
        await nodes.add_node(dsn, empty_dsn)
    assert [node.id for node in await nodes.list_nodes(dsn)] == [1, 2]


async def test_a_node_holding_queues_is_not_removed(cluster: Cluster, dsn: str) -> None:
    with pytest.raises(nodes.NodeError, match="control node"):
        await nodes.remove_node(dsn, 1)
    queue = await cluster.routed.create_queue("q1")
    on_two = await cluster.routed.create_queue("q2")  # the node with fewer queues
    assert (nodes.node_of(queue.id), nodes.node_of(on_two.id)) == (1, 2)
    with pytest.raises(nodes.NodeError, match="still holds 1 queue"):
        await nodes.remove_node(dsn, 2)
    await cluster.routed.delete_queue(on_two.id)
    removed = await nodes.remove_node(dsn, 2)
    assert removed.state == "removed"
    assert [(n.id, n.state) for n in await nodes.list_nodes(dsn)] == [(1, "active"), (2, "removed")]
    with pytest.raises(nodes.NodeError, match="no active node 2"):
        await nodes.remove_node(dsn, 2)


async def test_queues_spread_over_the_nodes_and_their_names_stay_unique(cluster: Cluster) -> None:
    routed = cluster.routed
    created = [await routed.create_queue(f"q{n}") for n in range(4)]
    assert [nodes.node_of(queue.id) for queue in created] == [1, 2, 1, 2]
    for queue in created:
        with pytest.raises(errors.QueueExists):
            await routed.create_queue(queue.name)
    with pytest.raises(errors.QueueExists):  # directly on the control node, too
        await cluster.control.create_queue("q1")
    assert (await routed.get_queue("q3")).id == created[3].id
    assert (await routed.get_queue(created[3].id)).name == "q3"
    assert [queue.name for queue in await routed.list_queues()] == ["q0", "q2", "q1", "q3"]
    await routed.delete_queue(created[3].id)
    with pytest.raises(errors.QueueNotFound):
        await routed.get_queue("q3")
    again = await routed.create_queue("q3")  # the name is free again
    assert again.name == "q3"


async def test_messages_go_to_and_come_from_the_node_of_their_queue(cluster: Cluster) -> None:
    routed = cluster.routed
    alice = await routed.register_client("alice")
    one, two = await routed.create_queue("one"), await routed.create_queue("two")
    [first] = await routed.send(alice.id, [two.id], b"hello", priority=7)
    assert nodes.node_of(first) == 2
    assert (await cluster.second.get_queue(two.id)).message_count == 1
    with pytest.raises(errors.BadRequest, match="spans nodes 1, 2"):
        await routed.send(alice.id, [one.id, two.id], b"both")
    popped = await routed.read(alice.id, queue_id=two.id, pop=True)
    assert (popped.id, popped.body, popped.priority) == (first, b"hello", 7)
    with pytest.raises(errors.QueueEmpty):
        await routed.read(alice.id, queue_id=two.id, pop=True)


async def test_a_read_by_sender_alone_looks_on_every_node(cluster: Cluster) -> None:
    routed = cluster.routed
    alice = await routed.register_client("alice")
    bob = await routed.register_client("bob")
    await routed.create_queue("one")
    two = await routed.create_queue("two")
    await routed.send(alice.id, [two.id], b"from alice", receiver=bob.id)
    found = await routed.read(bob.id, sender_id=alice.id, pop=True)
    assert (found.queue, found.body) == (two.id, b"from alice")
    with pytest.raises(errors.NoMessage):
        await routed.read(bob.id, sender_id=alice.id, pop=True)
    assert [queue.id for queue in await routed.queues_for_me(bob.id)] == []


async def test_leases_are_settled_on_their_node_in_the_order_asked(cluster: Cluster) -> None:
    routed = cluster.routed
    alice = await routed.register_client("alice")
    one, two = await routed.create_queue("one"), await routed.create_queue("two")
    for queue in (one, two, one):
        await routed.send(alice.id, [queue.id], b"m")
    lease = repository.Lease(30_000, await _instance(cluster.control))
    taken = [
        await routed.read(alice.id, queue_id=queue.id, pop=True, lease=lease)
        for queue in (two, one, one)
    ]
    deliveries = [message.delivery for message in taken]
    assert [nodes.node_of(d) for d in deliveries if d is not None] == [2, 1, 1]
    settled = await routed.ack_many(alice.id, [deliveries[1], 99, deliveries[0], deliveries[2]])  # type: ignore[list-item]
    assert [each.delivery for each in settled] == [deliveries[1], 99, deliveries[0], deliveries[2]]
    assert [each.status for each in settled] == [
        errors.Status.OK, errors.Status.LEASE_EXPIRED, errors.Status.OK, errors.Status.OK
    ]  # fmt: skip


async def test_a_client_registered_after_the_node_joined_can_send_there(cluster: Cluster) -> None:
    carol = await cluster.control.register_client("carol")  # not through the routed backend
    two = (await cluster.routed.create_queue("a"), await cluster.routed.create_queue("b"))[1]
    with pytest.raises(errors.CourierError):
        await cluster.routed.send(carol.id, [two.id], b"unknown on node 2 yet")
    await cluster.routed.login("carol", instance_id=await _instance(cluster.control))
    assert await cluster.routed.send(carol.id, [two.id], b"now known")


async def test_a_transaction_over_two_nodes_is_refused_whole(cluster: Cluster) -> None:
    from courier.db import transactions

    routed = cluster.routed
    alice = await routed.register_client("alice")
    one, two = await routed.create_queue("one"), await routed.create_queue("two")
    with pytest.raises(errors.BadRequest, match="a transaction spans nodes"):
        await routed.commit(
            alice.id,
            [
                transactions.SendOperation([one.id], b"a"),
                transactions.SendOperation([two.id], b"b"),
            ],
        )
    assert (await routed.get_queue(one.id)).message_count == 0
    assert await routed.commit(alice.id, [transactions.SendOperation([two.id], b"b")])


async def _instance(control: repository.Repository) -> int:
    return (await control.register_instance("127.0.0.1:1")).id


def test_ids_name_their_node() -> None:
    assert [nodes.node_of(i) for i in (1, SECOND - 1, SECOND + 1, 31 * SECOND + 5)] == [1, 1, 2, 32]
    assert 32 * SECOND <= 2**53  # every id of 32 nodes is exact in a JSON number


async def test_join_adds_a_database_once_and_follows_a_node_that_moved(
    dsn: str, empty_dsn: str
) -> None:
    first = await nodes.join(dsn, empty_dsn)
    moved = dsns.with_parameters(empty_dsn, application_name="moved")  # reached another way
    again = await nodes.join(dsn, moved)
    assert (first.id, again.id) == (2, 2)
    assert [node.dsn for node in await nodes.list_nodes(dsn)] == [dsn, moved]


async def test_queue_counts_count_each_nodes_queues(cluster: Cluster, dsn: str) -> None:
    assert await nodes.queue_counts(dsn) == {}
    made = [await cluster.routed.create_queue(name) for name in ("q1", "q2", "q3")]
    by_id = [nodes.node_of(queue.id) for queue in made]
    assert await nodes.queue_counts(dsn) == {node: by_id.count(node) for node in set(by_id)}
    assert set(by_id) == {1, 2}
