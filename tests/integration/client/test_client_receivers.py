"""Receivers named by name: ``get_client``, and send, request, publish, send_many and
transactions addressing a client by its name, against real servers."""

from __future__ import annotations

import asyncio
import re

import pytest
from client_harness import Connect, logged_in, register

import courier
from courier import errors, models
from helpers.names import Unique
from helpers.servers import ServerProcess, address


async def test_get_client_by_name_and_by_its_own_id(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    asker_name = unique("asker")
    asker = await logged_in(connect, servers[0], asker_name)
    bob = unique("bob")
    bob_id = await register(address(servers[1]), bob)
    assert await asker.get_client(bob) == models.ClientIdentity(bob_id, bob)
    assert asker.client_id is not None
    assert await asker.get_client(asker.client_id) == models.ClientIdentity(
        asker.client_id, asker_name
    )
    with pytest.raises(errors.NotAuthorised, match="only an admin may look another client up"):
        await asker.get_client(bob_id)
    carol = unique("carol")
    with pytest.raises(errors.ClientNotFound, match=rf"^no client named '{re.escape(carol)}'$"):
        await asker.get_client(carol)


async def test_a_receiver_named_by_name_is_the_only_one_who_may_take_it(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    alice = await logged_in(connect, servers[0], unique("alice"))
    bob_name = unique("bob")
    bob = await logged_in(connect, servers[1], bob_name)
    carol = await logged_in(connect, servers[0], unique("carol"))
    queue = await alice.create_queue(unique("q"))

    (sent,) = await alice.send(queue, "for bob", receiver=bob_name)
    assert await carol.pop(queue) is None
    message = await bob.pop(queue)
    assert (message.id, message.text, message.receiver) == (sent, "for bob", bob.client_id)

    many = await alice.send_many(queue, ["one", "two"], receiver=bob_name)
    assert await carol.pop_many(queue, 10) == []
    taken = await bob.pop_many(queue, 10)
    assert [m.id for m in taken] == [ids[0] for ids in many]
    assert {m.receiver for m in taken} == {bob.client_id}

    own = [courier.Outgoing("mine", receiver=bob_name), "anyone's", courier.Outgoing("id")]
    mixed = await alice.send_many(queue, own, receiver=carol.client_id)
    assert [m.id for m in await bob.pop_many(queue, 10)] == [mixed[0][0]]
    assert [(m.text, m.receiver) for m in await carol.pop_many(queue, 10)] == [
        ("anyone's", carol.client_id), ("id", carol.client_id),
    ]  # fmt: skip


async def test_an_unknown_receiver_name_sends_nothing(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    alice = await logged_in(connect, servers[0], unique("alice"))
    queue = await alice.create_queue(unique("q"))
    nobody = unique("nobody")
    with pytest.raises(errors.ClientNotFound, match=f"no client named '{nobody}'"):
        await alice.send(queue, "lost", receiver=nobody)
    with pytest.raises(errors.ClientNotFound, match=f"no client named '{nobody}'"):
        await alice.send_many(queue, ["lost"], receiver=nobody)
    lost = courier.Outgoing("lost", receiver=nobody)
    with pytest.raises(
        errors.ClientNotFound, match=f"^message 2 of the batch: no client named '{nobody}'$"
    ):
        await alice.send_many(queue, ["fine", lost, lost])
    assert (await alice.get_queue(queue.id)).message_count == 0


async def test_request_to_a_named_receiver_is_answered(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    asker = await logged_in(connect, servers[0], unique("asker"))
    worker_name = unique("worker")
    worker = await logged_in(connect, servers[1], worker_name)
    queue = await asker.create_queue(unique("rpc"))

    async def serve() -> None:
        job = await worker.receive(queue, timeout=10)
        assert job is not None and job.receiver == worker.client_id
        await worker.reply(job, "done")

    serving = asyncio.ensure_future(serve())
    answer = await asker.request(queue, "work", timeout=10, receiver=worker_name)
    await serving
    assert (answer.text, answer.sender, answer.receiver) == (
        "done", worker.client_id, asker.client_id,
    )  # fmt: skip


async def test_publish_to_a_named_receiver(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    alice = await logged_in(connect, servers[0], unique("alice"))
    bob_name = unique("bob")
    bob = await logged_in(connect, servers[1], bob_name)
    topic = await alice.create_topic(unique("news"))
    subscription = await bob.subscribe(topic)
    copies = await alice.publish(topic, "for bob only", receiver=bob_name)
    assert list(copies) == [subscription.queue]
    message = await bob.pop(subscription)
    assert (message.text, message.receiver) == ("for bob only", bob.client_id)


async def test_a_transaction_looks_receiver_names_up_at_its_commit(
    servers: list[ServerProcess], unique: Unique
) -> None:
    alice_name, bob_name = unique("alice"), unique("bob")
    await register(address(servers[0]), alice_name)
    async with courier.AsyncClient.connect(address(servers[0]), name=alice_name) as alice:
        queue = await alice.create_queue(unique("q"))
        topic = await alice.create_topic(unique("news"))
        subscription = await alice.subscribe(topic)
        async with alice.transaction() as tx:
            tx.send(queue, "sent", receiver=bob_name)
            tx.send(queue, "for anyone")
            tx.publish(topic, "published", receiver=bob_name)
            await register(address(servers[1]), bob_name)  # bob exists by the commit only
        first = await alice.pop(queue)
        assert (first.text, first.receiver) == ("for anyone", None)  # bob's is not alice's
        assert await alice.pop(subscription) is None
    async with courier.AsyncClient.connect(address(servers[1]), name=bob_name) as bob:
        mine = await bob.pop(queue)
        assert (mine.text, mine.receiver) == ("sent", bob.client_id)
        published = await bob.pop(subscription.queue)
        assert (published.text, published.receiver) == ("published", bob.client_id)


async def test_a_transaction_naming_nobody_stores_nothing_and_releases_its_leases(
    servers: list[ServerProcess], unique: Unique
) -> None:
    alice_name = unique("alice")
    await register(address(servers[0]), alice_name)
    async with courier.AsyncClient.connect(address(servers[0]), name=alice_name) as alice:
        queue = await alice.create_queue(unique("q"))
        await alice.send(queue, "job")
        job = await alice.receive(queue, timeout=5, lease=60)
        assert job is not None
        nobody = unique("nobody")
        with pytest.raises(errors.ClientNotFound, match=f"no client named '{nobody}'"):
            async with alice.transaction() as failing:
                failing.ack(job)
                failing.send(queue, "never", receiver=nobody)
        again = await alice.receive(queue, timeout=2, lease=60)  # at once, not in 60 s
        assert again is not None and (again.id, again.text) == (job.id, "job")
        assert await alice.pop(queue) is None  # "never" was not stored


async def test_a_name_is_looked_up_once_and_an_id_never(
    servers: list[ServerProcess], unique: Unique
) -> None:
    alice_name, bob_name = unique("alice"), unique("bob")
    await register(address(servers[0]), alice_name)
    bob_id = await register(address(servers[0]), bob_name)
    calls: list[courier.CallRecord] = []
    async with courier.AsyncClient.connect(
        address(servers[0]), name=alice_name,
        recorder=lambda row: calls.append(courier.CallRecord._make(row)),
    ) as alice:  # fmt: skip
        queue = await alice.create_queue(unique("q"))
        for receiver in (bob_name, bob_name, bob_id, None):
            await alice.send(queue, "hi", receiver=receiver)
    operations = [call.operation for call in calls]
    assert operations.count("get_client") == 1
    assert operations.index("get_client") == operations.index("send") - 1
    assert operations.count("send") == 4


async def test_reads_keep_to_a_sender_named_by_name(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    alice_name = unique("alice")
    alice = await logged_in(connect, servers[0], alice_name)
    carol = await logged_in(connect, servers[0], unique("carol"))
    bob = await logged_in(connect, servers[1], unique("bob"))
    queue = await alice.create_queue(unique("q"))
    await carol.send(queue, "from carol")
    firsts = [(await alice.send(queue, f"from alice {n}"))[0] for n in range(4)]

    peeked = await bob.peek(queue, sender=alice_name)
    assert (peeked.id, peeked.sender) == (firsts[0], alice.client_id)
    assert (await bob.peek(sender=alice_name)).id == firsts[0]  # no queue: every queue
    assert (await bob.pop(queue, sender=alice_name)).id == firsts[0]
    assert (await bob.receive(queue, timeout=5, sender=alice_name)).id == firsts[1]
    assert [m.id for m in await bob.pop_many(queue, 10, sender=alice_name)] == firsts[2:]
    nobody = unique("nobody")
    with pytest.raises(errors.ClientNotFound, match=f"no client named '{nobody}'"):
        await bob.pop(queue, sender=nobody)
    assert (await bob.pop(queue, sender=alice_name)) is None
    assert (await bob.pop(queue)).text == "from carol"  # the unknown name took nothing
