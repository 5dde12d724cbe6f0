"""Sending: atomic fan-out to several queues, and every way a send is refused."""

from __future__ import annotations

import datetime

import asyncpg
import pytest
from db_helpers import message_count

from courier import config, errors, models
from courier.db import repository

LIMIT = 64 * 1024


async def test_send_stores_one_independent_copy_per_queue(
    repo: repository.Repository, writer: models.ClientInfo, reader: models.ClientInfo
) -> None:
    first = await repo.create_queue("first")
    second = await repo.create_queue("second")
    before = datetime.datetime.now(datetime.UTC)

    ids = await repo.send(writer.id, [second.id, first.id], b"hello", context=7, priority=9)

    assert len(set(ids)) == 2
    popped = await repo.read(reader.id, queue_id=first.id, pop=True)
    assert popped.id == ids[1]  # ids follow the order of queue_ids
    assert (popped.queue, popped.sender, popped.receiver) == (first.id, writer.id, None)
    assert (popped.context, popped.priority, popped.body) == (7, 9, b"hello")
    assert before - datetime.timedelta(seconds=5) < popped.created_at
    assert popped.created_at < datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=5)
    # Popping one copy leaves the other.
    remaining = await repo.read(reader.id, queue_id=second.id)
    assert (remaining.id, remaining.body) == (ids[0], b"hello")


async def test_defaults(repo: repository.Repository, writer: models.ClientInfo) -> None:
    queue = await repo.create_queue("q")
    await repo.send(writer.id, [queue.id], b"plain")

    message = await repo.read(writer.id, queue_id=queue.id)
    assert (message.priority, message.context, message.receiver) == (5, None, None)


async def test_receiver_need_not_exist(
    repo: repository.Repository, writer: models.ClientInfo
) -> None:
    queue = await repo.create_queue("q")
    (message_id,) = await repo.send(writer.id, [queue.id], b"to nobody yet", receiver=777)
    assert (await repo.get_queue(queue.id)).message_count == 1
    with pytest.raises(errors.QueueEmpty):
        await repo.read(writer.id, queue_id=queue.id)
    assert (await repo.read(777, queue_id=queue.id)).id == message_id


async def test_a_missing_queue_stores_nothing(
    repo: repository.Repository, pool: asyncpg.Pool, writer: models.ClientInfo
) -> None:
    queue = await repo.create_queue("q")
    with pytest.raises(errors.QueueNotFound, match="queue 999 does not exist"):
        await repo.send(writer.id, [queue.id, 999], b"all or nothing")
    assert await message_count(pool) == 0


@pytest.mark.parametrize("priority", [0, 11, -5])
async def test_priority_outside_1_to_10_is_refused(
    repo: repository.Repository, pool: asyncpg.Pool, writer: models.ClientInfo, priority: int
) -> None:
    queue = await repo.create_queue("q")
    with pytest.raises(errors.InvalidPriority):
        await repo.send(writer.id, [queue.id], b"x", priority=priority)
    assert await message_count(pool) == 0


@pytest.mark.parametrize("priority", [1, 10])
async def test_priority_bounds_are_accepted(
    repo: repository.Repository, writer: models.ClientInfo, priority: int
) -> None:
    queue = await repo.create_queue("q")
    await repo.send(writer.id, [queue.id], b"x", priority=priority)
    assert (await repo.read(writer.id, queue_id=queue.id)).priority == priority


async def test_body_limit_counts_utf8_bytes(
    repo: repository.Repository, pool: asyncpg.Pool, writer: models.ClientInfo
) -> None:
    queue = await repo.create_queue("q")
    at_limit = ("é" * (LIMIT // 2)).encode()  # two bytes each
    await repo.send(writer.id, [queue.id], at_limit)
    assert (await repo.read(writer.id, queue_id=queue.id, pop=True)).body == at_limit

    with pytest.raises(errors.PayloadTooLarge) as caught:
        await repo.send(writer.id, [queue.id], at_limit + b"a")
    assert (caught.value.size, caught.value.limit) == (LIMIT + 1, LIMIT)
    assert await message_count(pool) == 0


async def test_configured_limit_is_used(
    pool: asyncpg.Pool, writer: models.ClientInfo, queue: models.Queue
) -> None:
    small = repository.Repository(pool, config.Limits(max_body_bytes=10))
    await small.send(writer.id, [queue.id], b"0123456789")
    with pytest.raises(errors.PayloadTooLarge) as caught:
        await small.send(writer.id, [queue.id], b"0123456789!")
    assert (caught.value.size, caught.value.limit) == (11, 10)


async def test_database_enforces_the_limit_itself(
    pool: asyncpg.Pool, writer: models.ClientInfo, queue: models.Queue
) -> None:
    """A caller that skips the repository's check still cannot store an oversized body."""

    class Unchecked(repository.Repository):
        def _check_message(self, body: bytes, priority: int) -> None:
            pass

    unchecked = Unchecked(pool, config.Limits(max_body_bytes=4))
    with pytest.raises(errors.PayloadTooLarge) as caught:
        await unchecked.send(writer.id, [queue.id], "ünï".encode())  # 5 bytes
    assert (caught.value.size, caught.value.limit) == (5, 4)
    with pytest.raises(errors.InvalidPriority):
        await unchecked.send(writer.id, [queue.id], b"x", priority=0)
    assert await message_count(pool) == 0


async def test_read_only_sender_is_not_authorised(
    repo: repository.Repository, pool: asyncpg.Pool, queue: models.Queue
) -> None:
    watcher = await repo.register_client("watcher", models.ClientMode.READ_ONLY)
    with pytest.raises(errors.NotAuthorised):
        await repo.send(watcher.id, [queue.id], b"not allowed")
    assert await message_count(pool) == 0


async def test_unknown_sender_is_not_found(
    repo: repository.Repository, queue: models.Queue
) -> None:
    with pytest.raises(errors.ClientNotFound):
        await repo.send(999, [queue.id], b"who am I")


@pytest.mark.parametrize("queue_ids", [[], "twice"])
async def test_no_queue_or_a_queue_twice_is_a_bad_request(
    repo: repository.Repository,
    pool: asyncpg.Pool,
    writer: models.ClientInfo,
    queue: models.Queue,
    queue_ids: list[int] | str,
) -> None:
    targets = [queue.id, queue.id] if queue_ids == "twice" else []
    with pytest.raises(errors.BadRequest):
        await repo.send(writer.id, targets, b"x")
    assert await message_count(pool) == 0


@pytest.mark.parametrize("receiver", [0, -3])
async def test_receiver_must_be_a_positive_id(
    repo: repository.Repository, writer: models.ClientInfo, queue: models.Queue, receiver: int
) -> None:
    with pytest.raises(errors.BadRequest):
        await repo.send(writer.id, [queue.id], b"x", receiver=receiver)


@pytest.mark.parametrize("context", [-(2**63), 2**63 - 1])
async def test_context_holds_any_64_bit_integer(
    repo: repository.Repository, writer: models.ClientInfo, queue: models.Queue, context: int
) -> None:
    await repo.send(writer.id, [queue.id], b"x", context=context)
    assert (await repo.read(writer.id, queue_id=queue.id)).context == context


async def test_context_beyond_64_bits_is_a_bad_request(
    repo: repository.Repository, pool: asyncpg.Pool, writer: models.ClientInfo, queue: models.Queue
) -> None:
    with pytest.raises(errors.BadRequest):
        await repo.send(writer.id, [queue.id], b"x", context=2**63)
    assert await message_count(pool) == 0


@pytest.mark.parametrize("body", [b"a\x00b", b"\xff\xfe not UTF-8", b"", bytes(range(256))])
async def test_any_bytes_are_stored_exactly(
    repo: repository.Repository, writer: models.ClientInfo, queue: models.Queue, body: bytes
) -> None:
    (message_id,) = await repo.send(writer.id, [queue.id], body)
    popped = await repo.read(writer.id, queue_id=queue.id, pop=True)
    assert (popped.id, popped.body) == (message_id, body)
