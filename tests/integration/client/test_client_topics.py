"""Topics against real servers: fan-out, all-or-none publishes, durable and
non-durable subscriptions (a clean close and a killed middleware), unsubscribing."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from client_harness import Connect, logged_in, register

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


async def client_named(server: ServerProcess, name: str) -> courier.AsyncClient:
    await register(address(server), name)
    return await courier.AsyncClient.connect(address(server), name=name)


async def eventually(check: Callable[[], Awaitable[bool]], within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not await check():
        assert time.monotonic() < deadline, "the condition never held"
        await asyncio.sleep(0.05)


async def drain(client: courier.AsyncClient, queue: int) -> list[bytes]:
    messages = await client.receive_many(queue, max_messages=1000)
    return [message.body for message in messages]


async def test_a_publish_stores_one_copy_per_subscription(
    connect: Connect, servers: list[ServerProcess], unique: Unique
) -> None:
    publisher = await logged_in(connect, servers[0], unique("pub"))
    topic = await publisher.create_topic(unique("news"))
    readers = [await logged_in(connect, servers[1], unique("reader")) for _ in range(3)]
    subscriptions = [await reader.subscribe(topic.name) for reader in readers]
    copies = await publisher.publish(topic, "extra! extra!", priority=7)
    assert sorted(copies) == sorted(s.queue for s in subscriptions)
    listed = await publisher.get_topic(topic.name)
    assert [s.backlog for s in listed.subscriptions] == [1, 1, 1]
    for reader, subscription in zip(readers, subscriptions, strict=True):
        message = await reader.receive(subscription, timeout=5)
        assert message is not None
        assert (message.body, message.priority) == (b"extra! extra!", 7)
        assert message.id == copies[subscription.queue]


async def test_a_topic_without_subscriptions_stores_nothing(
    alice: courier.AsyncClient, unique: Unique
) -> None:
    topic = await alice.create_topic(unique("quiet"))
    queues_before = len(await alice.list_queues())
    assert await alice.publish(topic, "anyone?") == {}
    assert len(await alice.list_queues()) == queues_before
    assert (await alice.get_topic(topic.id)).subscriptions == ()


async def test_a_publish_one_subscription_refuses_stores_no_copy(
    alice: courier.AsyncClient, servers: list[ServerProcess], unique: Unique
) -> None:
    topic = await alice.create_topic(unique("atomic"))
    full = await alice.subscribe(topic, name="full")
    roomy = await alice.subscribe(topic, name="roomy")
    await alice.configure_queue(full, max_messages=1, overflow="refuse")
    await alice.publish(topic, "first")
    with pytest.raises(errors.QuotaExceeded):
        await alice.publish(topic, "second")
    with pytest.raises(errors.PayloadTooLarge):
        await alice.publish(topic, b"x" * (64 * 1024 + 1))
    assert await drain(alice, roomy.queue) == [b"first"]
    assert await drain(alice, full.queue) == [b"first"]


async def test_a_durable_subscriber_away_gets_everything_when_back(
    alice: courier.AsyncClient, servers: list[ServerProcess], unique: Unique
) -> None:
    topic = await alice.create_topic(unique("durable"))
    name = unique("bob")
    bob = await client_named(servers[1], name)
    first = await bob.subscribe(topic.name)
    assert (first.name, first.durable, first.queue_name) == (name, True, f"{topic.name}:{name}")
    await bob.close()
    for number in range(3):
        await alice.publish(topic, f"while away {number}")
    async with courier.AsyncClient.connect(address(servers[0]), name=name) as back:
        again = await back.subscribe(topic.name)
        assert again.queue == first.queue
        assert await drain(back, again.queue) == [b"while away 0", b"while away 1", b"while away 2"]


async def test_a_non_durable_subscription_ends_with_its_connection(
    alice: courier.AsyncClient, servers: list[ServerProcess], unique: Unique
) -> None:
    topic = await alice.create_topic(unique("fleeting"))
    bob = await client_named(servers[1], unique("bob"))
    subscription = await bob.subscribe(topic, durable=False)
    assert not subscription.durable
    copies = await alice.publish(topic, "while here")
    assert list(copies) == [subscription.queue]
    assert await drain(bob, subscription.queue) == [b"while here"]
    await bob.close()

    async def gone() -> bool:
        return (await alice.get_topic(topic)).subscriptions == ()

    await eventually(gone)
    with pytest.raises(errors.QueueNotFound):
        await alice.get_queue(subscription.queue)
    assert await alice.publish(topic, "after") == {}


async def test_a_non_durable_subscription_ends_when_its_middleware_is_killed(
    alice: courier.AsyncClient, start_server: StartServer, unique: Unique
) -> None:
    topic = await alice.create_topic(unique("crash"))
    doomed = await start_server()
    bob = await client_named(doomed, unique("bob"))
    await bob.subscribe(topic, durable=False)
    durable = await bob.subscribe(topic, name=unique("kept"))
    assert len((await alice.get_topic(topic)).subscriptions) == 2
    doomed.signal(signal.SIGKILL)
    await doomed.wait()

    async def only_durable_left() -> bool:
        return [s.queue for s in (await alice.get_topic(topic)).subscriptions] == [durable.queue]

    await eventually(only_durable_left)
    assert list(await alice.publish(topic, "survives")) == [durable.queue]
    await bob.close()


async def test_unsubscribing_stops_delivery_and_deletes_the_queue(
    alice: courier.AsyncClient, unique: Unique
) -> None:
    topic = await alice.create_topic(unique("leaving"))
    staying = await alice.subscribe(topic, name="staying")
    leaving = await alice.subscribe(topic, name="leaving")
    await alice.publish(topic, "before")
    await alice.unsubscribe(leaving)
    assert list(await alice.publish(topic, "after")) == [staying.queue]
    with pytest.raises(errors.QueueNotFound):
        await alice.receive(leaving, timeout=0)
    with pytest.raises(errors.QueueNotFound):
        await alice.unsubscribe(leaving)
    assert await drain(alice, staying.queue) == [b"before", b"after"]


async def test_deleting_a_topic_deletes_its_subscriptions_queues(
    alice: courier.AsyncClient, unique: Unique
) -> None:
    topic = await alice.create_topic(unique("doomed"))
    subscription = await alice.subscribe(topic)
    await alice.publish(topic, "lost with the topic")
    await alice.delete_topic(topic.name)
    with pytest.raises(errors.TopicNotFound):
        await alice.get_topic(topic.id)
    with pytest.raises(errors.QueueNotFound):
        await alice.get_queue(subscription.queue)
    with pytest.raises(errors.TopicNotFound):
        await alice.publish(topic.name, "nobody")
    assert topic.name not in [t.name for t in await alice.list_topics()]


async def test_names_that_clash_are_typed_errors(
    alice: courier.AsyncClient, unique: Unique
) -> None:
    topic = await alice.create_topic(unique("clash"))
    with pytest.raises(errors.TopicExists):
        await alice.create_topic(topic.name)
    fleeting = await alice.subscribe(topic, durable=False, name="mine")
    with pytest.raises(errors.QueueExists):
        await alice.subscribe(topic, name="mine")
    durable = await alice.subscribe(topic, name="kept")
    with pytest.raises(errors.QueueExists):
        await alice.subscribe(topic, durable=False, name="kept")
    assert (await alice.subscribe(topic, name="kept")).queue == durable.queue
    with pytest.raises(errors.TopicNotFound):
        await alice.subscribe(unique("missing"))
    assert fleeting.queue_name == f"{topic.name}:mine"


async def test_concurrent_publishes_and_subscribes_never_half_publish(
    alice: courier.AsyncClient, servers: list[ServerProcess], unique: Unique
) -> None:
    """Every publish reaches a prefix of the subscriptions in the order they were
    made (all that existed when it ran), and each queue holds exactly the copies the
    replies name."""
    topic = await alice.create_topic(unique("race"))
    bob = await client_named(servers[1], unique("bob"))

    async def subscribe_slowly() -> list[int]:
        made = []
        for number in range(6):
            made.append((await bob.subscribe(topic, name=f"s{number}")).queue)
            await asyncio.sleep(0.01)
        return made

    async def publish(number: int) -> tuple[bytes, dict[int, int]]:
        body = f"m{number}".encode()
        return body, await alice.publish(topic, body)

    made, *published = await asyncio.gather(subscribe_slowly(), *(publish(n) for n in range(120)))
    for _, copies in published:
        assert list(copies) == made[: len(copies)]
    assert {len(copies) for _, copies in published} != {len(made)}, "no publish raced a subscribe"
    for queue in made:
        expected = {body for body, copies in published if queue in copies}
        assert set(await drain(bob, queue)) == expected
    await bob.close()
