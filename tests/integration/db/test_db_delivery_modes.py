"""Delivery modes in the database tier: a non-persistent message lives in the unlogged
partition of courier_messages, through every path that stores one (send, batch
send, the batched exchange, publish, transaction), keeps its mode through every move
(lease, nack, delay, expiry, dead letters, redrive), and is read, ordered, leased
and acknowledged exactly as a persistent one beside it."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
from db_helpers import LONG, lease

from courier import config, errors, models
from courier.db import batching, embedded, repository, schema, transactions

NON_PERSISTENT = repository.SendOptions(persistent=False)


async def partitions(pool: asyncpg.Pool) -> dict[bytes, str]:
    """Each ready message's body, and the partition that holds it."""
    rows = await pool.fetch("SELECT body, tableoid::regclass::text AS part FROM courier_messages")
    return {row["body"]: row["part"] for row in rows}


async def held_persistence(pool: asyncpg.Pool) -> dict[bytes, bool]:
    rows = await pool.fetch("SELECT body, persistent FROM courier_held_messages")
    return {row["body"]: row["persistent"] for row in rows}


PERSISTENT_PART = "courier_messages_persistent"
VOLATILE_PART = "courier_messages_volatile"


async def subscribed(
    repo: repository.Repository, client: models.ClientInfo, instance: int, *names: str
) -> list[int]:
    await repo.create_topic("news", creator=client.id)
    return [(await repo.subscribe(client.id, "news", instance_id=instance, name=name)).queue
            for name in names]  # fmt: skip


async def test_the_unlogged_partition_is_unlogged_and_the_other_is_not(pool: asyncpg.Pool) -> None:
    rows = await pool.fetch(
        "SELECT relname, relpersistence::text FROM pg_class"
        " WHERE relname IN ('courier_messages_persistent', 'courier_messages_volatile')"
    )
    assert {row["relname"]: row["relpersistence"] for row in rows} == {
        PERSISTENT_PART: "p",  # permanent: written to the write-ahead log
        VOLATILE_PART: "u",  # unlogged
    }


async def test_every_send_path_stores_each_mode_in_its_partition(
    pool: asyncpg.Pool, repo: repository.Repository, writer: models.ClientInfo,
    queue: models.Queue, batched_repo: batching.BatchedRepository,
) -> None:  # fmt: skip
    await repo.send(writer.id, [queue.id], b"send-p")
    await repo.send(writer.id, [queue.id], b"send-np", options=NON_PERSISTENT)
    # With an option the send takes the one-by-one path.
    options = repository.SendOptions(ttl_ms=LONG, persistent=False)
    await repo.send(writer.id, [queue.id], b"option-np", options=options)
    await repo.send_many(writer.id, [queue.id], [
        models.Draft(b"many-p"), models.Draft(b"many-np", persistent=False),
    ])  # fmt: skip
    await asyncio.gather(
        batched_repo.send(writer.id, [queue.id], b"exchange-p"),
        batched_repo.send(writer.id, [queue.id], b"exchange-np", options=NON_PERSISTENT),
    )
    found = await partitions(pool)
    assert found == {
        body: VOLATILE_PART if body.endswith(b"-np") else PERSISTENT_PART for body in found
    }
    assert len(found) == 7


async def test_a_batch_on_the_general_path_keeps_each_message_s_mode(
    pool: asyncpg.Pool, repo: repository.Repository, writer: models.ClientInfo,
    queue: models.Queue,
) -> None:  # fmt: skip
    # A queue with a limit sends a batch one message at a time.
    await repo.configure_queue(models.QueueSettings(queue.id, max_messages=100))
    await repo.send_many(writer.id, [queue.id], [
        models.Draft(b"p"), models.Draft(b"np", persistent=False),
    ])  # fmt: skip
    assert await partitions(pool) == {b"p": PERSISTENT_PART, b"np": VOLATILE_PART}


@pytest.mark.parametrize("order", [models.Order.TIME, models.Order.PRIORITY])
async def test_a_pop_takes_the_best_message_of_either_mode(
    batched_repo: batching.BatchedRepository, writer: models.ClientInfo,
    reader: models.ClientInfo, queue: models.Queue, order: models.Order,
) -> None:  # fmt: skip
    sent = [(b"1", 3, True), (b"2", 9, False), (b"3", 5, True), (b"4", 9, True), (b"5", 1, False)]
    for body, priority, persistent in sent:
        options = repository.SendOptions(persistent=persistent)
        await batched_repo.send(writer.id, [queue.id], body, priority=priority, options=options)
    expected = [b"1", b"2", b"3", b"4", b"5"]
    if order is models.Order.PRIORITY:
        expected = [b"2", b"4", b"3", b"1", b"5"]
    single = [await batched_repo.read(reader.id, queue_id=queue.id, pop=True, order=order)]
    rest = await batched_repo.pop_many(reader.id, queue.id, 10, order=order)
    assert [m.body for m in single + rest] == expected


async def test_a_leased_non_persistent_message_is_held_and_comes_back_non_persistent(
    pool: asyncpg.Pool, repo: repository.Repository, writer: models.ClientInfo,
    reader: models.ClientInfo, queue: models.Queue, instance: int,
) -> None:  # fmt: skip
    await repo.send(writer.id, [queue.id], b"np", options=NON_PERSISTENT)
    await repo.send(writer.id, [queue.id], b"p")
    first = await lease(repo, reader.id, queue.id, instance)
    assert first.body == b"np" and first.delivery is not None
    assert await held_persistence(pool) == {b"np": False}
    await repo.nack(reader.id, first.delivery, reason="busy")
    assert await partitions(pool) == {b"np": VOLATILE_PART, b"p": PERSISTENT_PART}

    again = await lease(repo, reader.id, queue.id, instance)  # its place in time kept
    second = await lease(repo, reader.id, queue.id, instance)
    assert (again.body, again.deliveries, again.failure) == (b"np", 2, "busy")
    assert again.delivery is not None and second.delivery is not None
    await repo.ack(reader.id, again.delivery)
    await repo.ack(reader.id, second.delivery)
    assert await partitions(pool) == {} and await held_persistence(pool) == {}
    with pytest.raises(errors.LeaseExpired):
        await repo.ack(reader.id, again.delivery)


async def test_an_expired_lease_returns_a_non_persistent_message_as_such(
    pool: asyncpg.Pool, repo: repository.Repository, writer: models.ClientInfo,
    reader: models.ClientInfo, queue: models.Queue, instance: int,
) -> None:  # fmt: skip
    await repo.send(writer.id, [queue.id], b"np", options=NON_PERSISTENT)
    await repo.read(reader.id, queue_id=queue.id, pop=True, lease=repository.Lease(1, instance))
    await asyncio.sleep(0.05)
    assert (await repo.sweep(100)).returned == 1
    assert await partitions(pool) == {b"np": VOLATILE_PART}


async def test_dead_letters_and_their_redrive_keep_the_mode(
    pool: asyncpg.Pool, writer: models.ClientInfo, reader: models.ClientInfo,
    queue: models.Queue, dead_letters: models.Queue, instance: int,
) -> None:  # fmt: skip
    repo = repository.ConsoleRepository(pool)
    await repo.configure_queue(models.QueueSettings(queue.id, 1, dead_letters.id))
    await repo.send(writer.id, [queue.id], b"np", options=NON_PERSISTENT)
    await repo.send(writer.id, [queue.id], b"p")
    for _ in range(2):
        taken = await lease(repo, reader.id, queue.id, instance)
        assert taken.delivery is not None
        await repo.nack(reader.id, taken.delivery, reason="broken")
    assert await partitions(pool) == {b"np": VOLATILE_PART, b"p": PERSISTENT_PART}
    dead = await repo.read(reader.id, queue_id=dead_letters.id)
    assert (dead.body, dead.dead_from, dead.failure) == (b"np", queue.id, "broken")

    assert await repo.redrive(dead_letters.id) == 2
    assert await partitions(pool) == {b"np": VOLATILE_PART, b"p": PERSISTENT_PART}
    back = await repo.pop_many(reader.id, queue.id, 5)
    assert [(m.body, m.dead_from) for m in back] == [(b"np", None), (b"p", None)]


async def test_an_expired_non_persistent_message_is_dead_lettered_as_such(
    pool: asyncpg.Pool, repo: repository.Repository, writer: models.ClientInfo,
    reader: models.ClientInfo, queue: models.Queue, dead_letters: models.Queue,
) -> None:  # fmt: skip
    settings = models.QueueSettings(queue.id, None, dead_letters.id, dead_letter_expired=True)
    await repo.configure_queue(settings)
    options = repository.SendOptions(ttl_ms=1, persistent=False)
    await repo.send(writer.id, [queue.id], b"late", options=options)
    await repo.send(writer.id, [queue.id], b"later", options=options)
    await asyncio.sleep(0.05)
    assert (await repo.sweep(100)).expired == 2
    assert await partitions(pool) == {b"late": VOLATILE_PART, b"later": VOLATILE_PART}
    dead = await repo.pop_many(reader.id, dead_letters.id, 5)
    assert [m.failure for m in dead] == ["expired", "expired"]


async def test_a_delayed_non_persistent_message_waits_held_and_falls_due_as_such(
    pool: asyncpg.Pool, repo: repository.Repository, writer: models.ClientInfo,
    reader: models.ClientInfo, queue: models.Queue,
) -> None:  # fmt: skip
    options = repository.SendOptions(delay_ms=1, persistent=False)
    await repo.send(writer.id, [queue.id], b"later", options=options)
    assert await held_persistence(pool) == {b"later": False}
    with pytest.raises(errors.QueueEmpty):
        await repo.read(reader.id, queue_id=queue.id, pop=True)
    await asyncio.sleep(0.05)
    assert (await repo.sweep(100)).returned == 1
    assert await partitions(pool) == {b"later": VOLATILE_PART}
    assert (await repo.read(reader.id, queue_id=queue.id, pop=True)).body == b"later"


async def test_a_dedup_id_on_a_non_persistent_message_is_refused_on_every_path(
    pool: asyncpg.Pool, repo: repository.Repository, writer: models.ClientInfo,
    queue: models.Queue, instance: int, batched_repo: batching.BatchedRepository,
) -> None:  # fmt: skip
    # A crash would lose the message and keep its dedup id: a retry would then be
    # answered with the ids of a message that is gone.
    await subscribed(repo, writer, instance, "a")
    refused = "a dedup id needs a persistent message"
    options = repository.SendOptions(dedup_id="order-1", persistent=False)
    with pytest.raises(errors.BadRequest, match=refused):
        await repo.send(writer.id, [queue.id], b"once", options=options)
    with pytest.raises(errors.BadRequest, match=refused):
        await repo.publish(writer.id, "news", b"once", options=options)
    drafts = [models.Draft(b"ok"), models.Draft(b"once", dedup_id="o-2", persistent=False)]
    with pytest.raises(errors.BadRequest, match=f"message 2 of the batch: {refused}"):
        await repo.send_many(writer.id, [queue.id], drafts)
    operation = transactions.SendOperation([queue.id], b"once", dedup_id="o-3", persistent=False)
    with pytest.raises(errors.BadRequest, match=f"operation 1 of the transaction: {refused}"):
        await repo.commit(writer.id, [operation])
    with pytest.raises(errors.BadRequest, match=refused):
        await batched_repo.send(writer.id, [queue.id], b"once", options=options)
    assert await partitions(pool) == {}
    # Persistent, the same dedup id is taken: the refusals stored nothing of it.
    persistent = repository.SendOptions(dedup_id="order-1")
    first = await repo.send(writer.id, [queue.id], b"once", options=persistent)
    assert await repo.send(writer.id, [queue.id], b"once", options=persistent) == first


async def test_a_topic_without_subscriptions_refuses_the_same_publish(
    repo: repository.Repository, writer: models.ClientInfo
) -> None:
    await repo.create_topic("empty", creator=writer.id)
    options = repository.SendOptions(dedup_id="order-1", persistent=False)
    with pytest.raises(errors.BadRequest, match="a dedup id needs a persistent message"):
        await repo.publish(writer.id, "empty", b"once", options=options)


async def test_a_non_persistent_response_reaches_its_requester(
    repo: repository.Repository, writer: models.ClientInfo, reader: models.ClientInfo,
    queue: models.Queue,
) -> None:  # fmt: skip
    await repo.send(writer.id, [queue.id], b"other", receiver=reader.id, context=8)
    await repo.send(
        writer.id, [queue.id], b"answer", receiver=reader.id, context=7, options=NON_PERSISTENT
    )
    answer = await repo.pop_response(reader.id, queue.id, 7)
    assert answer.body == b"answer"
    await repo.give_back(reader.id, answer)  # a reader that gave up: nothing is lost
    again = await repo.pop_response(reader.id, queue.id, 7)
    assert (again.id, again.body) == (answer.id, b"answer")


async def test_every_copy_of_a_non_persistent_publish_is_non_persistent(
    pool: asyncpg.Pool, repo: repository.Repository, writer: models.ClientInfo, instance: int
) -> None:
    queues = await subscribed(repo, writer, instance, "a", "b")
    await repo.publish(writer.id, "news", b"np", options=NON_PERSISTENT)
    await repo.publish(writer.id, "news", b"p")
    rows = await pool.fetch(
        "SELECT queue_id, body, persistent FROM courier_messages ORDER BY queue_id, id"
    )
    assert [(r["queue_id"], r["body"], r["persistent"]) for r in rows] == [
        (queue, body, persistent)
        for queue in sorted(queues)
        for body, persistent in ((b"np", False), (b"p", True))
    ]


async def test_a_transaction_stores_both_modes_or_nothing(
    pool: asyncpg.Pool, repo: repository.Repository, writer: models.ClientInfo,
    queue: models.Queue, instance: int,
) -> None:  # fmt: skip
    [subscription] = await subscribed(repo, writer, instance, "a")
    await repo.commit(writer.id, [
        transactions.SendOperation([queue.id], b"send-np", persistent=False),
        transactions.PublishOperation("news", b"publish-np", persistent=False),
        transactions.SendOperation([queue.id], b"send-p"),
    ])  # fmt: skip
    assert await partitions(pool) == {
        b"send-np": VOLATILE_PART, b"publish-np": VOLATILE_PART, b"send-p": PERSISTENT_PART,
    }  # fmt: skip
    published = await repo.read(writer.id, queue_id=subscription, pop=True)
    assert published.body == b"publish-np"
    await pool.execute("DELETE FROM courier_messages")

    failing = [
        transactions.SendOperation([queue.id], b"np", persistent=False),
        transactions.SendOperation([queue.id], b"p"),
        transactions.SendOperation([queue.id + 1000], b"nowhere", persistent=False),
    ]
    with pytest.raises(errors.QueueNotFound, match="operation 3 of the transaction"):
        await repo.commit(writer.id, failing)
    assert await partitions(pool) == {}


async def test_a_batch_send_stores_both_modes_or_nothing(
    pool: asyncpg.Pool, repo: repository.Repository, writer: models.ClientInfo,
    queue: models.Queue,
) -> None:  # fmt: skip
    drafts = [models.Draft(b"np", persistent=False), models.Draft(b"bad", priority=11)]
    with pytest.raises(errors.InvalidPriority, match="message 2 of the batch"):
        await repo.send_many(writer.id, [queue.id], drafts)
    assert await partitions(pool) == {}


async def test_a_full_queue_refuses_a_non_persistent_send_as_any_other(
    pool: asyncpg.Pool, repo: repository.Repository, writer: models.ClientInfo,
    queue: models.Queue,
) -> None:  # fmt: skip
    await repo.configure_queue(models.QueueSettings(queue.id, max_messages=1))
    await repo.send(writer.id, [queue.id], b"p")
    with pytest.raises(errors.QuotaExceeded):
        await repo.send(writer.id, [queue.id], b"np", options=NON_PERSISTENT)
    assert await partitions(pool) == {b"p": PERSISTENT_PART}


async def test_the_older_send_versions_store_persistent_messages(
    pool: asyncpg.Pool, repo: repository.Repository, writer: models.ClientInfo,
    reader: models.ClientInfo, queue: models.Queue,
) -> None:  # fmt: skip
    # Middleware from before migration 0018 still calls the versions before it.
    await pool.fetch(
        "SELECT * FROM courier_send_v3($1, $2, 'old', NULL, 5, NULL, 100, 0, NULL, NULL, 0,"
        " NULL)", writer.id, [queue.id],
    )  # fmt: skip
    assert await partitions(pool) == {b"old": PERSISTENT_PART}
    assert (await repo.read(reader.id, queue_id=queue.id, pop=True)).body == b"old"


# -- a database crash -------------------------------------------------------------------


@pytest.fixture
def own_server() -> Iterator[embedded.EmbeddedPostgres]:
    """A durable embedded server of this test's own, which it may crash."""
    # Outside pytest's basetemp, which any pytest run may reset to mode 0700.
    home = Path(tempfile.mkdtemp(prefix="courier-crash-test-"))
    server = embedded.EmbeddedPostgres(home / "data")
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(home, ignore_errors=True)


async def send_both(dsn: str) -> int:
    """A persistent and a non-persistent message in a new queue; the queue's id."""
    await schema.migrate(dsn)
    repo = await repository.Repository.connect(dsn, config.PoolSettings(min_size=1, max_size=2))
    try:
        writer = await repo.register_client("writer")
        queue = await repo.create_queue("jobs")
        await repo.send(writer.id, [queue.id], b"persistent")
        await repo.send(writer.id, [queue.id], b"non-persistent", options=NON_PERSISTENT)
        await repo.send_many(writer.id, [queue.id], [models.Draft(b"np-batch", persistent=False)])
        return queue.id
    finally:
        await repo.close()


async def bodies_in(dsn: str, queue_id: int) -> list[bytes]:
    connection = await asyncpg.connect(dsn)
    try:
        rows = await connection.fetch(
            "SELECT body FROM courier_messages WHERE queue_id = $1 ORDER BY id", queue_id
        )
        return [row["body"] for row in rows]
    finally:
        await connection.close()


def test_a_crash_loses_the_non_persistent_messages_and_keeps_the_persistent_ones(
    own_server: embedded.EmbeddedPostgres,
) -> None:
    dsn = own_server.start()
    queue_id = asyncio.run(send_both(dsn))
    assert asyncio.run(bodies_in(dsn, queue_id)) == [b"persistent", b"non-persistent", b"np-batch"]

    own_server.stop(immediate=True)  # as `pg_ctl stop -m immediate`: no checkpoint
    dsn = own_server.start()  # recovers from the write-ahead log

    assert asyncio.run(bodies_in(dsn, queue_id)) == [b"persistent"]


def test_a_fast_shutdown_keeps_both_modes(own_server: embedded.EmbeddedPostgres) -> None:
    # Unlogged rows survive a clean stop; only crash recovery empties them.
    dsn = own_server.start()
    queue_id = asyncio.run(send_both(dsn))
    own_server.stop()
    dsn = own_server.start()
    assert asyncio.run(bodies_in(dsn, queue_id)) == [b"persistent", b"non-persistent", b"np-batch"]
