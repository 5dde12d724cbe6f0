"""Transactions against real servers: a commit applies every send, publish and ack or
none; nothing shows before it; errors, failing operations, a lost connection and the
limits all leave everything as it was."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator

import pytest
from client_harness import register

import courier
from courier import errors
from helpers.names import Unique
from helpers.servers import ServerProcess, StartServer, address


@pytest.fixture
async def alice(servers: list[ServerProcess], unique: Unique) -> AsyncIterator[courier.AsyncClient]:
    name = unique("alice")
    await register(address(servers[0]), name)
    async with courier.AsyncClient.connect(address(servers[0]), name=name) as client:
        yield client


async def leased_job(client: courier.AsyncClient, queue: str, lease: float = 30) -> courier.Message:
    await client.send(queue, "job")
    job = await client.receive(queue, timeout=5, lease=lease)
    assert job is not None
    return job


async def bodies(client: courier.AsyncClient, queue: str | int) -> list[bytes]:
    return [m.body for m in await client.receive_many(queue, max_messages=100)]


async def queues(client: courier.AsyncClient, unique: Unique, *names: str) -> list[str]:
    made = [unique(name) for name in names]
    for name in made:
        await client.create_queue(name)
    return made


async def test_a_commit_applies_sends_publishes_and_acks_together(
    alice: courier.AsyncClient, unique: Unique
) -> None:
    jobs, results = await queues(alice, unique, "jobs", "results")
    topic = await alice.create_topic(unique("news"))
    subscription = await alice.subscribe(topic)
    job = await leased_job(alice, jobs)
    async with alice.transaction() as tx:
        tx.send(results, "result")
        tx.publish(topic, "job done")
        tx.ack(job)
        assert await alice.peek(results) is None  # nothing shows before the commit
    assert [len(ids) for ids in tx.results or []] == [1, 1, 0]
    assert await bodies(alice, results) == [b"result"]
    assert await bodies(alice, subscription) == [b"job done"]
    with pytest.raises(errors.LeaseExpired):
        await alice.nack(job)  # acknowledged: the message is gone


async def test_a_transactions_sends_and_publishes_keep_their_properties(
    alice: courier.AsyncClient, unique: Unique
) -> None:
    (results,) = await queues(alice, unique, "results")
    topic = await alice.create_topic(unique("news"))
    subscription = await alice.subscribe(topic)
    async with alice.transaction() as tx:
        tx.send(results, "sent", properties={"op": "send"})
        tx.publish(topic, "published", properties={"op": "publish", "n": "1"})
        tx.send(results, "plain")
    taken = await alice.receive_many(results, max_messages=10)
    assert [(m.text, m.properties) for m in taken] == [("sent", {"op": "send"}), ("plain", {})]
    published = await alice.pop(subscription)
    assert published.properties == {"op": "publish", "n": "1"}


async def test_properties_beyond_the_limits_end_the_transaction_with_nothing_applied(
    alice: courier.AsyncClient, unique: Unique
) -> None:
    (results,) = await queues(alice, unique, "results")
    topic = await alice.create_topic(unique("news"))
    subscription = await alice.subscribe(topic)
    with pytest.raises(errors.BadRequest, match="65 properties"):
        async with alice.transaction() as tx:
            tx.send(results, "fine", properties={"k": "v"})
            tx.publish(topic, "bad", properties={f"k{n}": "v" for n in range(65)})
    with pytest.raises(errors.BadRequest, match="at most 4096 bytes"):
        async with alice.transaction() as tx:
            tx.publish(topic, "fine")
            tx.send(results, "bad", properties={"k": "v" * 4097})
    with pytest.raises(errors.BadRequest, match="dedup id must not be empty"):
        async with alice.transaction() as tx:
            tx.send(results, "fine")
            tx.publish(topic, "bad", dedup_id="")
    assert await alice.pop(results) is None
    assert await alice.pop(subscription) is None


def test_the_blocking_client_commits_with_a_with_block(
    servers: list[ServerProcess], unique: Unique
) -> None:
    name, results = unique("carol"), unique("results")
    asyncio.run(register(address(servers[0]), name))
    with courier.Client.connect(address(servers[0]), name=name) as client:
        client.create_queue(results)
        with client.transaction() as tx:
            tx.send(results, "one")
            tx.send(results, "two")
        assert [m.body for m in client.receive_many(results, max_messages=10)] == [b"one", b"two"]
        with pytest.raises(RuntimeError), client.transaction() as tx:
            tx.send(results, "never")
            raise RuntimeError("changed my mind")
        assert client.pop(results) is None


async def test_an_error_in_the_block_applies_nothing_and_releases_the_leases(
    alice: courier.AsyncClient, unique: Unique
) -> None:
    jobs, results = await queues(alice, unique, "jobs", "results")
    job = await leased_job(alice, jobs, lease=60)
    with pytest.raises(RuntimeError):
        async with alice.transaction() as tx:
            tx.send(results, "result")
            tx.ack(job)
            raise RuntimeError("the work failed")
    assert await alice.pop(results) is None
    again = await alice.receive(jobs, timeout=2, lease=60)  # at once, not in 60 s
    assert again is not None and (again.id, again.deliveries) == (job.id, 2)


async def test_a_failing_operation_fails_the_whole_commit(
    alice: courier.AsyncClient, unique: Unique
) -> None:
    jobs, results, doomed = await queues(alice, unique, "jobs", "results", "doomed")
    doomed_id = (await alice.get_queue(doomed)).id
    await alice.delete_queue(doomed)
    held = await leased_job(alice, jobs)
    expiring = await leased_job(alice, jobs, lease=0.2)
    await asyncio.sleep(0.5)

    tx = alice.transaction()
    tx.send(results, "first")
    tx.ack(held)
    tx.ack(expiring)
    with pytest.raises(errors.LeaseExpired, match="operation 3 of the transaction"):
        await tx.commit()

    tx = alice.transaction()
    tx.ack(held)
    tx.send(doomed_id, "to a queue that is gone")
    with pytest.raises(errors.QueueNotFound, match="operation 2 of the transaction"):
        await tx.commit()

    assert await alice.pop(results) is None
    await alice.ack(held)  # still held: neither commit acknowledged it


async def test_a_full_subscription_fails_a_publish_in_a_commit(
    alice: courier.AsyncClient, unique: Unique
) -> None:
    (results,) = await queues(alice, unique, "results")
    topic = await alice.create_topic(unique("news"))
    full = await alice.subscribe(topic, name="full")
    await alice.configure_queue(full, max_messages=1)
    await alice.publish(topic, "fills it")
    with pytest.raises(errors.QuotaExceeded, match="operation 2"):
        async with alice.transaction() as tx:
            tx.send(results, "stays out")
            tx.publish(topic, "no room")
    assert await alice.pop(results) is None


async def test_a_connection_lost_before_the_commit_applies_nothing(
    alice: courier.AsyncClient, start_server: StartServer, unique: Unique
) -> None:
    (results,) = await queues(alice, unique, "results")
    doomed = await start_server()
    name = unique("dave")
    await register(address(doomed), name)
    dave = await courier.AsyncClient.connect(address(doomed), name=name)
    tx = dave.transaction()
    tx.send(results, "lost")
    doomed.signal(signal.SIGKILL)
    await doomed.wait()
    for _ in range(500):  # until the client has seen the connection close
        if dave.server is None:
            break
        await asyncio.sleep(0.01)
    with pytest.raises(errors.ConnectionLost, match="nothing of it was applied"):
        await tx.commit()
    assert await alice.pop(results) is None
    await dave.close()


async def test_limits_are_checked_before_any_work(
    alice: courier.AsyncClient, start_server: StartServer, unique: Unique
) -> None:
    (results,) = await queues(alice, unique, "results")
    tx = alice.transaction()
    for _ in range(101):  # the default limit is 100 operations
        tx.send(results, "x")
    with pytest.raises(errors.BadRequest, match="at most 100 operations"):
        await tx.commit()
    tx = alice.transaction()
    for _ in range(17):  # 17 x 63 KiB: each body fits, all of them pass 1 MiB
        tx.send(results, b"y" * 63 * 1024)
    with pytest.raises(errors.PayloadTooLarge, match="transaction's bodies"):
        await tx.commit()
    assert await alice.pop(results) is None

    strict = await start_server(max_transaction_age=0.3)
    name = unique("erin")
    await register(address(strict), name)
    async with courier.AsyncClient.connect(address(strict), name=name) as erin:
        with pytest.raises(errors.TransactionExpired):
            async with erin.transaction() as tx:
                tx.send(results, "too late")
                await asyncio.sleep(0.5)
    assert await alice.pop(results) is None
