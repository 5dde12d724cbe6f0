"""Moving messages between two nodes exactly once, also when a mover stops half-way."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from courier import errors
from courier.db import nodes, repository, transfers


@dataclass
class Pair:
    one: repository.Repository
    two: repository.Repository
    sender: int
    source: int  # a queue on node 1
    target: int  # a queue on node 2


@pytest.fixture
async def pair(dsn: str, empty_dsn: str) -> AsyncIterator[Pair]:
    one = await repository.Repository.connect(dsn)
    sender = (await one.register_client("alice")).id
    await nodes.add_node(dsn, empty_dsn)  # copies alice
    two = await repository.Repository.connect(empty_dsn)
    source, target = await one.create_queue("q#1"), await two.create_queue("q#2")
    try:
        yield Pair(one, two, sender, source.id, target.id)
    finally:
        await one.close()
        await two.close()


async def bodies(repo: repository.Repository, queue: int, reader: int) -> list[bytes]:
    found = []
    while True:
        try:
            found.append((await repo.read(reader, queue_id=queue, pop=True)).body)
        except errors.QueueEmpty:
            return found


async def test_a_move_takes_the_oldest_messages_with_their_ids_and_priorities(pair: Pair) -> None:
    ids = [(await pair.one.send(pair.sender, [pair.source], f"m{n}".encode(), priority=n + 1))[0]
           for n in range(5)]  # fmt: skip
    assert await transfers.move(pair.one, pair.two, pair.source, pair.target, 3) == 3
    moved = [await pair.two.read(pair.sender, queue_id=pair.target, pop=True) for _ in range(3)]
    assert [(m.id, m.body, m.priority, m.queue) for m in moved] == [
        (ids[n], f"m{n}".encode(), n + 1, pair.target) for n in range(3)
    ]
    assert await bodies(pair.one, pair.source, pair.sender) == [b"m3", b"m4"]
    assert await transfers.move(pair.one, pair.two, pair.source, pair.target, 3) == 0


async def test_a_mover_that_stopped_after_the_first_step_is_finished_later(pair: Pair) -> None:
    for n in range(4):
        await pair.one.send(pair.sender, [pair.source], f"m{n}".encode())
    transfer_id = transfers.new_transfer_id()
    rows = await pair.one.transfer_out(transfer_id, pair.source, pair.target, 3)
    # Stopped here: the messages are in neither queue, so nobody can read them twice.
    assert await bodies(pair.one, pair.source, pair.sender) == [b"m3"]
    assert (await pair.two.get_queue(pair.target)).message_count == 0
    finish = transfers.node_of({1: pair.one, 2: pair.two})
    assert await transfers.finish_pending(pair.one, finish) == len(rows) == 3
    assert await transfers.finish_pending(pair.one, finish) == 0
    assert await bodies(pair.two, pair.target, pair.sender) == [b"m0", b"m1", b"m2"]


async def test_a_second_step_done_twice_stores_the_messages_once(pair: Pair) -> None:
    for n in range(3):
        await pair.one.send(pair.sender, [pair.source], f"m{n}".encode())
    transfer_id = transfers.new_transfer_id()
    rows = await pair.one.transfer_out(transfer_id, pair.source, pair.target, 3)
    assert await pair.two.transfer_in(transfer_id, pair.target, rows) == 3
    # The mover stopped before step 3; finishing sends the rows again.
    await transfers.finish_pending(pair.one, transfers.node_of({1: pair.one, 2: pair.two}))
    assert await bodies(pair.two, pair.target, pair.sender) == [b"m0", b"m1", b"m2"]
    assert await pair.one.pending_transfers() == []


async def test_messages_for_a_target_that_is_gone_go_back(pair: Pair) -> None:
    for n in range(2):
        await pair.one.send(pair.sender, [pair.source], f"m{n}".encode())
    await pair.one.transfer_out(transfers.new_transfer_id(), pair.source, pair.target, 2)
    await pair.two.delete_queue(pair.target)
    await transfers.finish_pending(pair.one, transfers.node_of({1: pair.one, 2: pair.two}))
    assert await bodies(pair.one, pair.source, pair.sender) == [b"m0", b"m1"]


async def test_leased_messages_stay_where_they_are(pair: Pair) -> None:
    await pair.one.send(pair.sender, [pair.source], b"held")
    await pair.one.send(pair.sender, [pair.source], b"free")
    instance = (await pair.one.register_instance("127.0.0.1:1")).id
    held = await pair.one.read(
        pair.sender, queue_id=pair.source, pop=True, lease=repository.Lease(30_000, instance)
    )
    assert held.body == b"held"
    assert await transfers.move(pair.one, pair.two, pair.source, pair.target, 10) == 1
    await pair.one.ack(pair.sender, held.delivery)  # type: ignore[arg-type]
    assert await bodies(pair.two, pair.target, pair.sender) == [b"free"]


async def test_a_transfer_applied_before_its_target_went_is_not_undone(pair: Pair) -> None:
    for n in range(2):
        await pair.one.send(pair.sender, [pair.source], f"m{n}".encode())
    transfer_id = transfers.new_transfer_id()
    rows = await pair.one.transfer_out(transfer_id, pair.source, pair.target, 2)
    assert await pair.two.transfer_in(transfer_id, pair.target, rows) == 2
    taken = await bodies(pair.two, pair.target, pair.sender)  # consumed on the target
    await pair.two.delete_queue(pair.target)
    # The mover stopped before step 3; finishing must not bring the messages back.
    await transfers.finish_pending(pair.one, transfers.node_of({1: pair.one, 2: pair.two}))
    assert taken == [b"m0", b"m1"]
    assert await bodies(pair.one, pair.source, pair.sender) == []
    assert await pair.one.pending_transfers() == []


async def test_a_move_leaves_messages_for_one_receiver_where_they_are(pair: Pair) -> None:
    await pair.one.send(pair.sender, [pair.source], b"reply", receiver=pair.sender, context=7)
    await pair.one.send(pair.sender, [pair.source], b"anyone")
    assert await transfers.move(pair.one, pair.two, pair.source, pair.target, 10) == 1
    assert await bodies(pair.two, pair.target, pair.sender) == [b"anyone"]
    reply = await pair.one.pop_response(pair.sender, pair.source, 7)
    assert reply.body == b"reply"


async def test_a_drain_takes_everything_and_the_queue_goes_once_nothing_is_held(
    pair: Pair,
) -> None:
    await pair.one.send(pair.sender, [pair.source], b"held")
    await pair.one.send(pair.sender, [pair.source], b"free")
    instance = (await pair.one.register_instance("127.0.0.1:1")).id
    held = await pair.one.read(
        pair.sender, queue_id=pair.source, pop=True, lease=repository.Lease(30_000, instance)
    )
    assert await transfers.drain(pair.one, pair.two, pair.source, pair.target) == (1, False)
    await pair.one.send(pair.sender, [pair.source], b"late")  # still open while one is held
    await pair.one.nack(pair.sender, held.delivery)  # type: ignore[arg-type]
    assert await transfers.drain(pair.one, pair.two, pair.source, pair.target) == (2, True)
    with pytest.raises(errors.QueueNotFound):
        await pair.one.send(pair.sender, [pair.source], b"too late")
    assert sorted(await bodies(pair.two, pair.target, pair.sender)) == [b"free", b"held", b"late"]
