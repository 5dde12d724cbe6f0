"""Message properties in the database tier: stored with the message, carried through
every move (lease, nack, delay, expiry, dead letters, redrive, give-back), returned
by every read, in every copy of a publish and in a transaction's sends and publishes,
refused beyond their limits with nothing stored."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from db_helpers import LONG, lease

from courier import errors, models
from courier.db import batching, repository, transactions

TRACE = {"trace": "t-1", "lang": "fr"}


def with_properties(properties: dict[str, str], **options: object) -> repository.SendOptions:
    return repository.SendOptions(properties=properties, **options)  # type: ignore[arg-type]


async def stored_count(pool: asyncpg.Pool) -> int:
    count: int = await pool.fetchval(
        "SELECT (SELECT count(*) FROM courier_messages)"
        " + (SELECT count(*) FROM courier_held_messages)"
    )
    return count


async def test_a_send_stores_properties_and_a_pop_returns_them(
    repo: repository.Repository, pool: asyncpg.Pool, writer: models.ClientInfo,
    reader: models.ClientInfo, queue: models.Queue,
) -> None:  # fmt: skip
    await repo.send(writer.id, [queue.id], b"with", options=with_properties(TRACE))
    await repo.send(writer.id, [queue.id], b"without")
    stored = await pool.fetch("SELECT properties FROM courier_messages ORDER BY id")
    assert [row["properties"] is None for row in stored] == [False, True]  # NULL: none

    peeked = await repo.read(reader.id, queue_id=queue.id)
    first = await repo.read(reader.id, queue_id=queue.id, pop=True)
    second = await repo.read(reader.id, queue_id=queue.id, pop=True)
    assert (peeked.properties, first.properties, first.body) == (TRACE, TRACE, b"with")
    assert second.properties == {}


async def test_a_batch_send_keeps_each_message_s_properties_in_order(
    repo: repository.Repository, writer: models.ClientInfo, reader: models.ClientInfo,
    queue: models.Queue,
) -> None:  # fmt: skip
    drafts = [
        models.Draft(b"1", properties={"n": "1"}),
        models.Draft(b"2"),
        models.Draft(b"3", properties={"n": "3", "é": "ü"}),
    ]
    ids = await repo.send_many(writer.id, [queue.id], drafts)
    assert len(ids) == 3
    taken = await repo.pop_many(reader.id, queue.id, 10)
    assert [(m.body, m.properties) for m in taken] == [
        (b"1", {"n": "1"}), (b"2", {}), (b"3", {"n": "3", "é": "ü"}),
    ]  # fmt: skip


@pytest.mark.parametrize("path", ["limited queue", "delayed message"])
async def test_a_batch_with_properties_on_the_general_path_keeps_them(
    repo: repository.Repository, writer: models.ClientInfo, reader: models.ClientInfo,
    queue: models.Queue, path: str,
) -> None:  # fmt: skip
    delay = 0
    if path == "limited queue":
        await repo.configure_queue(models.QueueSettings(queue.id, max_messages=100))
    else:
        delay = 1
    drafts = [models.Draft(b"a", properties={"k": "a"}, delay_ms=delay), models.Draft(b"b")]
    await repo.send_many(writer.id, [queue.id], drafts)
    await asyncio.sleep(0.05)
    await repo.sweep(100)
    taken = await repo.pop_many(reader.id, queue.id, 10)
    assert [(m.body, m.properties) for m in taken] == [(b"a", {"k": "a"}), (b"b", {})]


async def test_properties_survive_a_lease_a_nack_and_the_redelivery(
    repo: repository.Repository, writer: models.ClientInfo, reader: models.ClientInfo,
    queue: models.Queue, instance: int,
) -> None:  # fmt: skip
    await repo.send(writer.id, [queue.id], b"job", options=with_properties(TRACE))
    first = await lease(repo, reader.id, queue.id, instance)
    assert first.properties == TRACE and first.delivery is not None
    await repo.nack(reader.id, first.delivery, reason="busy")
    again = await lease(repo, reader.id, queue.id, instance)
    assert (again.properties, again.deliveries, again.failure) == (TRACE, 2, "busy")
    assert again.delivery is not None
    await repo.nack(reader.id, again.delivery, delay_ms=1)  # held again, then due
    await asyncio.sleep(0.05)
    assert (await repo.sweep(100)).returned == 1
    third = await repo.pop_many(reader.id, queue.id, 5, lease=repository.Lease(LONG, instance))
    assert [m.properties for m in third] == [TRACE]


async def test_a_dead_letter_and_its_redrive_keep_the_properties(
    pool: asyncpg.Pool, writer: models.ClientInfo, reader: models.ClientInfo,
    queue: models.Queue, dead_letters: models.Queue, instance: int,
) -> None:  # fmt: skip
    repo = repository.ConsoleRepository(pool)
    await repo.configure_queue(models.QueueSettings(queue.id, 1, dead_letters.id))
    await repo.send(writer.id, [queue.id], b"fails", options=with_properties(TRACE))
    taken = await lease(repo, reader.id, queue.id, instance)
    assert taken.delivery is not None
    await repo.nack(reader.id, taken.delivery, reason="broken")
    dead = await repo.read(reader.id, queue_id=dead_letters.id)
    assert (dead.dead_from, dead.failure, dead.properties) == (queue.id, "broken", TRACE)

    assert await repo.redrive(dead_letters.id) == 1
    back = await repo.read(reader.id, queue_id=queue.id, pop=True)
    assert (back.body, back.dead_from, back.properties) == (b"fails", None, TRACE)


async def test_an_expired_dead_letter_keeps_the_properties(
    repo: repository.Repository, writer: models.ClientInfo, reader: models.ClientInfo,
    queue: models.Queue, dead_letters: models.Queue,
) -> None:  # fmt: skip
    settings = models.QueueSettings(queue.id, None, dead_letters.id, dead_letter_expired=True)
    await repo.configure_queue(settings)
    await repo.send(writer.id, [queue.id], b"late", options=with_properties(TRACE, ttl_ms=1))
    await asyncio.sleep(0.05)
    assert (await repo.sweep(100)).expired == 1
    dead = await repo.read(reader.id, queue_id=dead_letters.id, pop=True)
    assert (dead.failure, dead.properties) == ("expired", TRACE)


async def test_a_delayed_message_keeps_its_properties_when_it_falls_due(
    repo: repository.Repository, writer: models.ClientInfo, reader: models.ClientInfo,
    queue: models.Queue,
) -> None:  # fmt: skip
    await repo.send(writer.id, [queue.id], b"later", options=with_properties(TRACE, delay_ms=1))
    await asyncio.sleep(0.05)
    assert (await repo.sweep(100)).returned == 1
    assert (await repo.read(reader.id, queue_id=queue.id, pop=True)).properties == TRACE


async def test_a_response_and_a_given_back_pop_keep_the_properties(
    repo: repository.Repository, writer: models.ClientInfo, reader: models.ClientInfo,
    queue: models.Queue,
) -> None:  # fmt: skip
    await repo.send(
        writer.id, [queue.id], b"answer", receiver=reader.id, context=7,
        options=with_properties({"status": "done"}),
    )  # fmt: skip
    answer = await repo.pop_response(reader.id, queue.id, 7)
    assert answer.properties == {"status": "done"}
    await repo.give_back(reader.id, answer)  # a reader that gave up: stored again as it was
    again = await repo.read(reader.id, queue_id=queue.id, pop=True)
    assert (again.id, again.properties) == (answer.id, {"status": "done"})


async def test_batched_sends_and_pops_carry_properties(
    batched_repo: batching.BatchedRepository, writer: models.ClientInfo,
    reader: models.ClientInfo, queue: models.Queue,
) -> None:  # fmt: skip
    repo = batched_repo
    sends = [
        repo.send(writer.id, [queue.id], str(n).encode(),
                  options=with_properties({"n": str(n)}) if n % 2 else repository.PLAIN_SEND)
        for n in range(6)
    ]  # fmt: skip
    await asyncio.gather(*sends)
    taken = await asyncio.gather(
        *(repo.read(reader.id, queue_id=queue.id, pop=True) for _ in range(6))
    )
    by_body = {int(m.body): m.properties for m in taken}
    assert by_body == {n: ({"n": str(n)} if n % 2 else {}) for n in range(6)}


async def test_properties_beyond_the_limits_are_refused_and_nothing_is_stored(
    repo: repository.Repository, pool: asyncpg.Pool, writer: models.ClientInfo,
    queue: models.Queue,
) -> None:  # fmt: skip
    too_many = {f"k{n}": "v" for n in range(65)}
    with pytest.raises(errors.BadRequest, match="65 properties"):
        await repo.send(writer.id, [queue.id], b"x", options=with_properties(too_many))
    drafts = [models.Draft(b"ok"), models.Draft(b"bad", properties={"k": "v" * 4097})]
    with pytest.raises(errors.BadRequest, match=r"message 2 of the batch: .*at most 4096 bytes"):
        await repo.send_many(writer.id, [queue.id], drafts)
    assert await stored_count(pool) == 0


async def test_the_stored_functions_refuse_properties_that_are_no_object(
    pool: asyncpg.Pool, writer: models.ClientInfo, queue: models.Queue
) -> None:
    with pytest.raises(asyncpg.PostgresError, match="properties are an object"):
        await pool.fetch(
            "SELECT * FROM courier_send_v3($1, $2, 'x', NULL, 5, NULL, 100, 0, NULL, NULL, 0,"
            " '[1, 2]')", writer.id, [queue.id],
        )  # fmt: skip
    with pytest.raises(asyncpg.PostgresError, match="message 2 of the batch: properties"):
        await pool.fetch(
            "SELECT * FROM courier_send_many_v2($1, $2, '{a,b}', '{NULL,NULL}', '{5,5}',"
            " '{NULL,NULL}', '{0,0}', '{NULL,NULL}', '{NULL,NULL}', $3, 100, 0)",
            writer.id, [queue.id], ['{"k": "v"}', '"text"'],
        )  # fmt: skip
    assert await stored_count(pool) == 0


async def test_a_message_sent_through_the_old_version_reads_as_without_properties(
    repo: repository.Repository, pool: asyncpg.Pool, writer: models.ClientInfo,
    reader: models.ClientInfo, queue: models.Queue,
) -> None:  # fmt: skip
    # An older middleware still running during an upgrade sends with courier_send_v2.
    await pool.fetch(
        "SELECT * FROM courier_send_v2($1, $2, 'old', NULL, 5, NULL, 100, 0, NULL, NULL, 0)",
        writer.id, [queue.id],
    )  # fmt: skip
    message = await repo.read(reader.id, queue_id=queue.id, pop=True)
    assert (message.body, message.properties) == (b"old", {})


async def subscribed(
    repo: repository.Repository, client: models.ClientInfo, instance: int, *names: str
) -> list[int]:
    await repo.create_topic("news", creator=client.id)
    return [(await repo.subscribe(client.id, "news", instance_id=instance, name=name)).queue
            for name in names]  # fmt: skip


async def test_every_copy_of_a_publish_carries_its_properties(
    repo: repository.Repository, writer: models.ClientInfo, instance: int
) -> None:
    queues = await subscribed(repo, writer, instance, "a", "b")
    await repo.publish(writer.id, "news", b"hi", options=with_properties(TRACE))
    await repo.publish(writer.id, "news", b"plain")
    for queue in queues:
        first = await repo.read(writer.id, queue_id=queue, pop=True)
        second = await repo.read(writer.id, queue_id=queue, pop=True)
        assert (first.body, first.properties) == (b"hi", TRACE)
        assert (second.body, second.properties) == (b"plain", {})


async def test_a_transaction_keeps_the_properties_of_its_sends_and_publishes(
    repo: repository.Repository, writer: models.ClientInfo, queue: models.Queue, instance: int
) -> None:
    [subscription] = await subscribed(repo, writer, instance, "a")
    await repo.commit(writer.id, [
        transactions.SendOperation([queue.id], b"sent", properties={"op": "send"}),
        transactions.PublishOperation("news", b"published", properties={"op": "publish"}),
        transactions.SendOperation([queue.id], b"plain"),
    ])  # fmt: skip
    sent = await repo.read(writer.id, queue_id=queue.id, pop=True)
    plain = await repo.read(writer.id, queue_id=queue.id, pop=True)
    published = await repo.read(writer.id, queue_id=subscription, pop=True)
    assert (sent.body, sent.properties) == (b"sent", {"op": "send"})
    assert (plain.body, plain.properties) == (b"plain", {})
    assert (published.body, published.properties) == (b"published", {"op": "publish"})


async def test_properties_beyond_the_limits_fail_a_publish_or_a_whole_transaction(
    repo: repository.Repository, pool: asyncpg.Pool, writer: models.ClientInfo,
    queue: models.Queue, instance: int,
) -> None:  # fmt: skip
    await subscribed(repo, writer, instance, "a")
    too_many = {f"k{n}": "v" for n in range(65)}
    with pytest.raises(errors.BadRequest, match="65 properties"):
        await repo.publish(writer.id, "news", b"x", options=with_properties(too_many))
    operations = [
        transactions.SendOperation([queue.id], b"fine", properties={"k": "v"}),
        transactions.PublishOperation("news", b"bad", properties={"k": "v" * 4097}),
    ]
    with pytest.raises(errors.BadRequest, match=r"operation 2 of the transaction: .*4096"):
        await repo.commit(writer.id, operations)
    assert await stored_count(pool) == 0


async def test_the_old_publish_and_commit_still_store_without_properties(
    repo: repository.Repository, pool: asyncpg.Pool, writer: models.ClientInfo,
    queue: models.Queue, instance: int,
) -> None:  # fmt: skip
    # Middleware from before migration 0016 still calls the first versions.
    [subscription] = await subscribed(repo, writer, instance, "a")
    await pool.fetch(
        "SELECT * FROM courier_publish_v1($1, NULL, 'news', 'old', NULL, 5, NULL, 100, 0,"
        " NULL, NULL, 0)", writer.id,
    )  # fmt: skip
    await pool.fetch(
        "SELECT * FROM courier_commit_v1($1, '{send}', '{1}', $2, '{NULL}', '{NULL}', '{old}',"
        " '{NULL}', '{5}', '{NULL}', '{0}', '{NULL}', '{NULL}', '{NULL}', 100, 0)",
        writer.id, [queue.id],
    )  # fmt: skip
    published = await repo.read(writer.id, queue_id=subscription, pop=True)
    sent = await repo.read(writer.id, queue_id=queue.id, pop=True)
    assert [(m.body, m.properties) for m in (published, sent)] == [(b"old", {}), (b"old", {})]
