"""Acknowledged delivery in the database tier: leases, redelivery, dead letters,
delays, expiry and dedup, against the real stored functions."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from db_helpers import LONG, lease

from courier import config, errors, models
from courier.db import repository

SHORT = 100  # ms: one that does, after a short sleep


async def held_count(pool: asyncpg.Pool) -> int:
    count: int = await pool.fetchval("SELECT count(*) FROM courier_held_messages")
    return count


async def sweep_after(repo: repository.Repository, seconds: float) -> repository.Sweep:
    await asyncio.sleep(seconds)
    return await repo.sweep(1000)


async def test_a_leased_message_stays_stored_but_invisible_until_acknowledged(
    repo: repository.Repository, pool: asyncpg.Pool, writer: models.ClientInfo,
    reader: models.ClientInfo, queue: models.Queue, instance: int,
) -> None:  # fmt: skip
    (sent,) = await repo.send(writer.id, [queue.id], b"work")
    taken = await lease(repo, reader.id, queue.id, instance)
    assert (taken.id, taken.body, taken.deliveries) == (sent, b"work", 1)
    assert taken.delivery is not None
    with pytest.raises(errors.QueueEmpty):
        await repo.read(writer.id, queue_id=queue.id, pop=True)
    assert await held_count(pool) == 1

    await repo.ack(reader.id, taken.delivery)
    assert await held_count(pool) == 0
    with pytest.raises(errors.LeaseExpired):
        await repo.ack(reader.id, taken.delivery)


async def test_only_the_holder_settles_a_delivery(
    repo: repository.Repository, writer: models.ClientInfo, reader: models.ClientInfo,
    queue: models.Queue, instance: int,
) -> None:  # fmt: skip
    await repo.send(writer.id, [queue.id], b"mine")
    taken = await lease(repo, reader.id, queue.id, instance)
    assert taken.delivery is not None
    for settle in (
        repo.ack(writer.id, taken.delivery),
        repo.nack(writer.id, taken.delivery),
        repo.extend(writer.id, taken.delivery, LONG),
    ):
        with pytest.raises(errors.LeaseExpired):
            await settle


async def test_an_expired_lease_delivers_again_and_the_late_ack_fails(
    repo: repository.Repository, writer: models.ClientInfo, reader: models.ClientInfo,
    queue: models.Queue, instance: int,
) -> None:  # fmt: skip
    other = await repo.register_client("other")
    (sent,) = await repo.send(writer.id, [queue.id], b"slow work")
    first = await lease(repo, reader.id, queue.id, instance, ms=SHORT)
    assert (await sweep_after(repo, 0.2)).returned == 1

    second = await lease(repo, other.id, queue.id, instance)
    assert (second.id, second.deliveries) == (sent, 2)
    assert second.delivery != first.delivery
    assert first.delivery is not None and second.delivery is not None
    with pytest.raises(errors.LeaseExpired):
        await repo.ack(reader.id, first.delivery)
    await repo.ack(other.id, second.delivery)


async def test_an_extended_lease_outlives_its_first_end(
    repo: repository.Repository, writer: models.ClientInfo, reader: models.ClientInfo,
    queue: models.Queue, instance: int,
) -> None:  # fmt: skip
    await repo.send(writer.id, [queue.id], b"long work")
    taken = await lease(repo, reader.id, queue.id, instance, ms=SHORT)
    assert taken.delivery is not None
    await repo.extend(reader.id, taken.delivery, LONG)
    assert (await sweep_after(repo, 0.2)).returned == 0
    await repo.ack(reader.id, taken.delivery)


async def test_a_redelivered_message_keeps_its_place_in_time_order(
    repo: repository.Repository, writer: models.ClientInfo, reader: models.ClientInfo,
    queue: models.Queue, instance: int,
) -> None:  # fmt: skip
    first, second = [(await repo.send(writer.id, [queue.id], body))[0] for body in (b"1", b"2")]
    taken = await lease(repo, reader.id, queue.id, instance)
    assert taken.id == first and taken.delivery is not None
    await repo.nack(reader.id, taken.delivery, reason="try again")
    again = await repo.read(reader.id, queue_id=queue.id, pop=True)
    assert (again.id, again.deliveries, again.failure) == (first, 1, "try again")
    assert (await repo.read(reader.id, queue_id=queue.id, pop=True)).id == second


async def test_a_nack_with_a_delay_hides_the_message_that_long(
    repo: repository.Repository, writer: models.ClientInfo, reader: models.ClientInfo,
    queue: models.Queue, instance: int,
) -> None:  # fmt: skip
    await repo.send(writer.id, [queue.id], b"later")
    taken = await lease(repo, reader.id, queue.id, instance)
    assert taken.delivery is not None
    assert await repo.nack(reader.id, taken.delivery, delay_ms=300) == "delayed"
    with pytest.raises(errors.LeaseExpired):  # the delivery is over: nothing to settle
        await repo.ack(reader.id, taken.delivery)
    assert (await sweep_after(repo, 0.05)).returned == 0
    with pytest.raises(errors.QueueEmpty):
        await repo.read(reader.id, queue_id=queue.id, pop=True)
    swept = await sweep_after(repo, 0.35)
    assert swept.returned == 1
    assert (await repo.read(reader.id, queue_id=queue.id, pop=True)).body == b"later"


async def test_after_max_deliveries_a_message_becomes_a_dead_letter_with_its_history(
    repo: repository.Repository, writer: models.ClientInfo, reader: models.ClientInfo,
    queue: models.Queue, dead_letters: models.Queue, instance: int,
) -> None:  # fmt: skip
    settings = models.QueueSettings(queue.id, max_deliveries=3, dead_letter_queue=dead_letters.id)
    assert await repo.configure_queue(settings) == settings
    (sent,) = await repo.send(writer.id, [queue.id], b"poison")
    outcomes = []
    for attempt in range(3):
        taken = await lease(repo, reader.id, queue.id, instance)
        assert taken.deliveries == attempt + 1 and taken.delivery is not None
        outcomes.append(await repo.nack(reader.id, taken.delivery, reason=f"boom {attempt}"))
    assert outcomes == ["visible", "visible", "dead"]
    with pytest.raises(errors.QueueEmpty):
        await repo.read(reader.id, queue_id=queue.id, pop=True)

    dead = await repo.read(reader.id, queue_id=dead_letters.id)
    assert (dead.id, dead.body, dead.deliveries) == (sent, b"poison", 3)
    assert (dead.dead_from, dead.failure) == (queue.id, "boom 2")


async def test_redrive_moves_dead_letters_back_with_a_fresh_count(
    pool: asyncpg.Pool, writer: models.ClientInfo, reader: models.ClientInfo,
    queue: models.Queue, dead_letters: models.Queue, instance: int,
) -> None:  # fmt: skip
    repo = repository.ConsoleRepository(pool)
    await repo.configure_queue(models.QueueSettings(queue.id, 1, dead_letters.id))
    for body in (b"a", b"b"):
        await repo.send(writer.id, [queue.id], body)
        taken = await lease(repo, reader.id, queue.id, instance)
        assert taken.delivery is not None
        await repo.nack(reader.id, taken.delivery)
    assert (await repo.get_queue(dead_letters.id)).message_count == 2

    assert await repo.redrive(dead_letters.id) == 2
    back = [await repo.read(reader.id, queue_id=queue.id, pop=True) for _ in range(2)]
    assert [(m.body, m.deliveries, m.dead_from) for m in back] == [(b"a", 0, None), (b"b", 0, None)]


async def test_without_a_dead_letter_queue_a_failing_message_is_dropped(
    repo: repository.Repository, pool: asyncpg.Pool, writer: models.ClientInfo,
    reader: models.ClientInfo, queue: models.Queue, instance: int,
) -> None:  # fmt: skip
    await repo.configure_queue(models.QueueSettings(queue.id, max_deliveries=1))
    await repo.send(writer.id, [queue.id], b"doomed")
    taken = await lease(repo, reader.id, queue.id, instance)
    assert taken.delivery is not None
    assert await repo.nack(reader.id, taken.delivery) == "dropped"
    assert await held_count(pool) == 0
    assert (await repo.get_queue(queue.id)).message_count == 0


async def test_a_queue_cannot_dead_letter_into_itself_or_nowhere(
    repo: repository.Repository, queue: models.Queue
) -> None:
    with pytest.raises(errors.BadRequest):
        await repo.configure_queue(models.QueueSettings(queue.id, 3, queue.id))
    with pytest.raises(errors.QueueNotFound):
        await repo.configure_queue(models.QueueSettings(queue.id, 3, 999_999))
    with pytest.raises(errors.QueueNotFound):
        await repo.configure_queue(models.QueueSettings(999_999))


async def test_a_delayed_send_is_invisible_until_its_time(
    repo: repository.Repository, writer: models.ClientInfo, queue: models.Queue
) -> None:
    options = repository.SendOptions(delay_ms=300)
    (sent,) = await repo.send(writer.id, [queue.id], b"soon", options=options)
    with pytest.raises(errors.QueueEmpty):
        await repo.read(writer.id, queue_id=queue.id)
    with pytest.raises(errors.QueueNotEmpty):  # held messages count as content
        await repo.delete_queue(queue.id, if_empty=True)
    swept = await sweep_after(repo, 0.35)
    assert swept.returned == 1
    assert (await repo.read(writer.id, queue_id=queue.id, pop=True)).id == sent


async def test_an_expired_message_is_dropped_or_dead_lettered_as_its_queue_says(
    repo: repository.Repository, writer: models.ClientInfo, queue: models.Queue,
    dead_letters: models.Queue,
) -> None:  # fmt: skip
    short = repository.SendOptions(ttl_ms=SHORT)
    await repo.send(writer.id, [queue.id], b"dropped", options=short)
    assert (await sweep_after(repo, 0.2)).expired == 1
    with pytest.raises(errors.QueueEmpty):
        await repo.read(writer.id, queue_id=queue.id)

    await repo.configure_queue(
        models.QueueSettings(queue.id, dead_letter_queue=dead_letters.id, dead_letter_expired=True)
    )
    (kept,) = await repo.send(writer.id, [queue.id], b"kept", options=short)
    await repo.send(writer.id, [queue.id], b"forever")
    assert (await sweep_after(repo, 0.2)).expired == 1
    dead = await repo.read(writer.id, queue_id=dead_letters.id)
    assert (dead.id, dead.dead_from, dead.failure) == (kept, queue.id, "expired")
    assert (await repo.read(writer.id, queue_id=queue.id)).body == b"forever"


async def test_a_sweep_says_when_the_next_message_falls_due(
    repo: repository.Repository, writer: models.ClientInfo, queue: models.Queue
) -> None:
    assert (await repo.sweep(10)).next_due is None
    await repo.send(writer.id, [queue.id], b"x", options=repository.SendOptions(delay_ms=60_000))
    due = (await repo.sweep(10)).next_due
    now = await repo.pool.fetchval("SELECT now()")
    assert due is not None and 59 < (due - now).total_seconds() <= 60.5


async def test_a_retried_send_with_its_dedup_id_stores_nothing_twice(
    repo: repository.Repository, pool: asyncpg.Pool, writer: models.ClientInfo,
    queue: models.Queue,
) -> None:  # fmt: skip
    other = await repo.create_queue("other")
    once = repository.SendOptions(dedup_id="order-17")
    first = await repo.send(writer.id, [queue.id, other.id], b"pay", options=once)
    again = await repo.send(writer.id, [queue.id, other.id], b"pay", options=once)
    assert again == first
    assert await pool.fetchval("SELECT count(*) FROM courier_messages") == 2
    # The id is the sender's own: another sender's same id is another message.
    stranger = await repo.register_client("stranger")
    assert await repo.send(stranger.id, [queue.id], b"pay", options=once) != first


async def test_concurrent_retries_with_one_dedup_id_store_one_message(
    pool: asyncpg.Pool, writer: models.ClientInfo, queue: models.Queue
) -> None:
    repo = repository.Repository(pool)
    once = repository.SendOptions(dedup_id="racing")
    answers = await asyncio.gather(
        *(repo.send(writer.id, [queue.id], b"r", options=once) for _ in range(8))
    )
    assert len({tuple(ids) for ids in answers}) == 1
    assert await pool.fetchval("SELECT count(*) FROM courier_messages") == 1


async def test_after_the_dedup_window_the_same_id_stores_again(
    pool: asyncpg.Pool, writer: models.ClientInfo, queue: models.Queue
) -> None:
    repo = repository.Repository(pool, config.Limits(dedup_window=0.2))
    once = repository.SendOptions(dedup_id="weekly")
    first = await repo.send(writer.id, [queue.id], b"w", options=once)
    assert await repo.send(writer.id, [queue.id], b"w", options=once) == first
    await asyncio.sleep(0.3)
    assert await repo.send(writer.id, [queue.id], b"w", options=once) != first
    await repo.sweep(10)  # forgets the stale entry
    assert await pool.fetchval("SELECT count(*) FROM courier_dedup") == 1


async def test_a_closed_session_or_a_stopped_instance_releases_its_leases(
    repo: repository.Repository, pool: asyncpg.Pool, writer: models.ClientInfo,
    reader: models.ClientInfo, queue: models.Queue, instance: int,
) -> None:  # fmt: skip
    other_instance = (await repo.register_instance("127.0.0.1:2")).id
    for body in (b"1", b"2", b"3"):
        await repo.send(writer.id, [queue.id], body)
    await lease(repo, reader.id, queue.id, instance)
    await lease(repo, reader.id, queue.id, instance)
    through_other = await lease(repo, reader.id, queue.id, other_instance)

    assert await repo.release_leases(reader.id, instance) == 2
    assert await held_count(pool) == 1
    await repo.unregister_instance(other_instance)
    assert await held_count(pool) == 0
    again = [await repo.read(reader.id, queue_id=queue.id, pop=True) for _ in range(3)]
    assert sorted(m.body for m in again) == [b"1", b"2", b"3"]
    assert through_other.delivery is not None
    with pytest.raises(errors.LeaseExpired):
        await repo.ack(reader.id, through_other.delivery)


async def test_giving_back_undoes_a_pop_for_a_reader_who_left(
    repo: repository.Repository, writer: models.ClientInfo, reader: models.ClientInfo,
    queue: models.Queue, instance: int,
) -> None:  # fmt: skip
    (plain_id,) = await repo.send(writer.id, [queue.id], b"plain", context=5)
    plain = await repo.read(reader.id, queue_id=queue.id, pop=True)
    await repo.give_back(reader.id, plain)
    restored = await repo.read(reader.id, queue_id=queue.id)
    assert restored == plain  # same id, time, body and context

    leased = await lease(repo, reader.id, queue.id, instance)
    await repo.give_back(reader.id, leased)
    again = await lease(repo, reader.id, queue.id, instance)
    assert (again.id, again.deliveries) == (plain_id, 1)  # the given-back lease is uncounted
