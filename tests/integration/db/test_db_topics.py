"""Topics in the stored functions: every way a subscription ends takes its queue,
publishes with dedup ids, and a publish racing an unsubscribe is never half stored."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from courier import errors, models
from courier.db import repository


async def queue_exists(repo: repository.Repository, queue_id: int) -> bool:
    try:
        await repo.get_queue(queue_id)
    except errors.QueueNotFound:
        return False
    return True


async def setup(repo: repository.Repository) -> tuple[models.ClientInfo, models.Instance]:
    client = await repo.register_client("alice")
    instance = await repo.register_instance("127.0.0.1:7400")
    await repo.create_topic("news", creator=client.id)
    return client, instance


async def test_an_expired_instance_takes_its_non_durable_subscriptions(
    repo: repository.Repository, pool: asyncpg.Pool
) -> None:
    alice, instance = await setup(repo)
    fleeting = await repo.subscribe(alice.id, "news", instance_id=instance.id, durable=False)
    kept = await repo.subscribe(alice.id, "news", instance_id=instance.id)
    await pool.execute(
        "UPDATE courier_instances SET heartbeat_at = now() - interval '1 hour' WHERE id = $1",
        instance.id,
    )
    assert await repo.expire_instances() == [instance.id]
    assert [s.queue for s in (await repo.get_topic("news")).subscriptions] == [kept.queue]
    assert not await queue_exists(repo, fleeting.queue)


async def test_logout_ends_only_that_clients_non_durable_subscriptions_there(
    repo: repository.Repository,
) -> None:
    alice, instance = await setup(repo)
    bob = await repo.register_client("bob")
    other = await repo.register_instance("127.0.0.1:7401")
    mine = await repo.subscribe(alice.id, "news", instance_id=instance.id, durable=False)
    elsewhere = await repo.subscribe(alice.id, "news", instance_id=other.id, durable=False)
    bobs = await repo.subscribe(bob.id, "news", instance_id=instance.id, durable=False)
    await repo.logout(alice.id, instance.id)
    left = {s.queue for s in (await repo.get_topic("news")).subscriptions}
    assert left == {elsewhere.queue, bobs.queue}
    assert not await queue_exists(repo, mine.queue)


async def test_deleting_a_subscriptions_queue_ends_it(repo: repository.Repository) -> None:
    alice, instance = await setup(repo)
    subscription = await repo.subscribe(alice.id, "news", instance_id=instance.id)
    await repo.delete_queue(subscription.queue)
    assert (await repo.get_topic("news")).subscriptions == ()
    assert await repo.publish(alice.id, "news", b"nobody") == []


async def test_a_retried_publish_with_a_dedup_id_is_stored_once(
    repo: repository.Repository,
) -> None:
    alice, instance = await setup(repo)
    subscription = await repo.subscribe(alice.id, "news", instance_id=instance.id)
    options = repository.SendOptions(dedup_id="story-1")
    first = await repo.publish(alice.id, "news", b"story", options=options)
    again = await repo.publish(alice.id, "news", b"story", options=options)
    assert again == first == [(subscription.queue, first[0][1])]
    assert (await repo.get_queue(subscription.queue)).message_count == 1


async def test_publishes_racing_unsubscribes_store_all_copies_or_skip_the_gone(
    repo: repository.Repository,
) -> None:
    alice, instance = await setup(repo)
    made = [
        await repo.subscribe(alice.id, "news", instance_id=instance.id, name=f"s{n}")
        for n in range(6)
    ]

    async def unsubscribe_all() -> None:
        for subscription in made:
            await repo.unsubscribe(subscription.queue)

    results = await asyncio.gather(
        unsubscribe_all(), *(repo.publish(alice.id, "news", b"m%d" % n) for n in range(60))
    )
    for copies in results[1:]:
        queues = [queue for queue, _ in copies]
        assert queues == [s.queue for s in made][len(made) - len(queues) :]
    with pytest.raises(errors.QueueNotFound):
        await repo.unsubscribe(made[0].queue)
