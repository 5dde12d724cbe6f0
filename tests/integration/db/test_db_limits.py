"""Queue limits: at most so many messages or bytes, then refuse a send or drop the oldest."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from courier import errors, models
from courier.db import repository

REFUSE, DROP_OLDEST = models.Overflow.REFUSE, models.Overflow.DROP_OLDEST


@pytest.fixture
async def lease(repo: repository.Repository) -> repository.Lease:
    """A minute's lease through a registered instance."""
    return repository.Lease(60_000, (await repo.register_instance("127.0.0.1:1")).id)


async def limit(
    repo: repository.Repository,
    queue: models.Queue,
    *,
    messages: int | None = None,
    size: int | None = None,
    overflow: models.Overflow = REFUSE,
) -> models.QueueSettings:
    settings = models.QueueSettings(
        queue.id, max_messages=messages, max_bytes=size, overflow=overflow
    )
    return await repo.configure_queue(settings)


async def bodies(pool: asyncpg.Pool, queue: models.Queue) -> list[bytes]:
    """The visible messages of the queue, oldest first."""
    rows = await pool.fetch(
        "SELECT body FROM courier_messages WHERE queue_id = $1 ORDER BY id", queue.id
    )
    return [bytes(row["body"]) for row in rows]


async def test_settings_round_trip_and_bad_ones_are_refused(
    repo: repository.Repository, queue: models.Queue
) -> None:
    configured = await limit(repo, queue, messages=3, size=100, overflow=DROP_OLDEST)
    assert configured == models.QueueSettings(
        queue.id, max_messages=3, max_bytes=100, overflow=DROP_OLDEST
    )
    with pytest.raises(errors.BadRequest):
        await limit(repo, queue, messages=0)
    with pytest.raises(errors.BadRequest):
        await limit(repo, queue, size=-1)


async def test_a_full_refusing_queue_refuses_the_send_whole(
    repo: repository.Repository, writer: models.ClientInfo, pool: asyncpg.Pool
) -> None:
    full, other = await repo.create_queue("full"), await repo.create_queue("other")
    await limit(repo, full, messages=2)
    await repo.send(writer.id, [full.id], b"one")
    await repo.send(writer.id, [full.id], b"two")
    with pytest.raises(errors.QuotaExceeded, match=f"queue {full.id} is full"):
        await repo.send(writer.id, [other.id, full.id], b"three")
    assert await bodies(pool, other) == []  # nothing of a refused send is stored
    await repo.read(writer.id, queue_id=full.id, pop=True)
    await repo.send(writer.id, [full.id], b"three")  # a pop made room
    assert await bodies(pool, full) == [b"two", b"three"]


async def test_leased_and_delayed_messages_count(
    repo: repository.Repository,
    writer: models.ClientInfo,
    queue: models.Queue,
    lease: repository.Lease,
) -> None:
    await limit(repo, queue, messages=2)
    await repo.send(
        writer.id, [queue.id], b"later", options=repository.SendOptions(delay_ms=60_000)
    )
    await repo.send(writer.id, [queue.id], b"now")
    await repo.read(writer.id, queue_id=queue.id, pop=True, lease=lease)
    with pytest.raises(errors.QuotaExceeded):
        await repo.send(writer.id, [queue.id], b"no room")


async def test_a_byte_limit_refuses_the_body_that_does_not_fit(
    repo: repository.Repository, writer: models.ClientInfo, pool: asyncpg.Pool, queue: models.Queue
) -> None:
    await limit(repo, queue, size=10)
    await repo.send(writer.id, [queue.id], b"123456")
    with pytest.raises(errors.QuotaExceeded):
        await repo.send(writer.id, [queue.id], b"12345")
    await repo.send(writer.id, [queue.id], b"1234")
    assert await bodies(pool, queue) == [b"123456", b"1234"]


async def test_a_batch_stores_what_fits_in_order_and_refuses_the_rest_alone(
    repo: repository.Repository, writer: models.ClientInfo, pool: asyncpg.Pool
) -> None:
    small, other = await repo.create_queue("small"), await repo.create_queue("roomy")
    await limit(repo, small, messages=2)
    batch = [repository.SendRequest(writer.id, [small.id], f"m{n}".encode()) for n in range(3)]
    batch.append(repository.SendRequest(writer.id, [other.id], b"elsewhere"))
    outcome = await repo.send_each(batch)
    assert [type(answer) for answer in outcome.answers] == [list, list, errors.QuotaExceeded, list]
    assert await bodies(pool, small) == [b"m0", b"m1"]
    assert await bodies(pool, other) == [b"elsewhere"]


async def test_racing_sends_cannot_both_take_the_last_room(
    repo: repository.Repository, writer: models.ClientInfo, pool: asyncpg.Pool, queue: models.Queue
) -> None:
    await limit(repo, queue, messages=1)
    racing = [repo.send(writer.id, [queue.id], f"r{n}".encode()) for n in range(6)]
    outcomes = await asyncio.gather(*racing, return_exceptions=True)
    assert sum(isinstance(outcome, list) for outcome in outcomes) == 1
    assert sum(isinstance(outcome, errors.QuotaExceeded) for outcome in outcomes) == 5
    assert len(await bodies(pool, queue)) == 1


async def test_a_dropping_queue_keeps_the_newest_messages(
    repo: repository.Repository, writer: models.ClientInfo, pool: asyncpg.Pool, queue: models.Queue
) -> None:
    await limit(repo, queue, messages=3, overflow=DROP_OLDEST)
    for n in range(5):
        await repo.send(writer.id, [queue.id], f"m{n}".encode())
    assert await bodies(pool, queue) == [b"m2", b"m3", b"m4"]
    batch = [repository.SendRequest(writer.id, [queue.id], f"b{n}".encode()) for n in range(2)]
    await repo.send_each(batch)
    assert await bodies(pool, queue) == [b"m4", b"b0", b"b1"]


async def test_a_dropping_queue_keeps_within_its_bytes_and_never_drops_a_lease(
    repo: repository.Repository,
    writer: models.ClientInfo,
    pool: asyncpg.Pool,
    queue: models.Queue,
    lease: repository.Lease,
) -> None:
    await limit(repo, queue, size=10, overflow=DROP_OLDEST)
    await repo.send(writer.id, [queue.id], b"leased")  # 6 bytes, then held by a lease
    taken = await repo.read(writer.id, queue_id=queue.id, pop=True, lease=lease)
    for body in (b"aa", b"bb", b"cc"):
        await repo.send(writer.id, [queue.id], body)
    assert await bodies(pool, queue) == [b"bb", b"cc"]  # 6 held + 4 visible = 10
    await repo.ack(writer.id, taken.delivery or 0)  # the lease was never dropped


async def test_a_lower_limit_on_a_dropping_queue_trims_it_at_once(
    repo: repository.Repository, writer: models.ClientInfo, pool: asyncpg.Pool, queue: models.Queue
) -> None:
    for n in range(5):
        await repo.send(writer.id, [queue.id], f"m{n}".encode())
    await limit(repo, queue, messages=4)  # refusing: what is there stays
    assert len(await bodies(pool, queue)) == 5
    await limit(repo, queue, messages=2, overflow=DROP_OLDEST)
    assert await bodies(pool, queue) == [b"m3", b"m4"]


async def test_a_batch_request_refused_for_another_reason_takes_no_room(
    repo: repository.Repository, writer: models.ClientInfo, pool: asyncpg.Pool, queue: models.Queue
) -> None:
    await limit(repo, queue, messages=1)
    batch = [
        repository.SendRequest(writer.id, [queue.id], b"bad priority", priority=0),
        repository.SendRequest(writer.id, [queue.id], b"fits"),
    ]
    outcome = await repo.send_each(batch)
    assert [type(answer) for answer in outcome.answers] == [errors.InvalidPriority, list]
    assert await bodies(pool, queue) == [b"fits"]


async def test_a_body_no_queue_could_keep_is_refused_even_by_a_dropping_queue(
    repo: repository.Repository, writer: models.ClientInfo, pool: asyncpg.Pool, queue: models.Queue
) -> None:
    await limit(repo, queue, size=5, overflow=DROP_OLDEST)
    await repo.send(writer.id, [queue.id], b"kept")
    with pytest.raises(errors.QuotaExceeded, match="can never fit"):
        await repo.send(writer.id, [queue.id], b"too big")
    outcome = await repo.send_each([repository.SendRequest(writer.id, [queue.id], b"too big")])
    assert isinstance(outcome.answers[0], errors.QuotaExceeded)
    assert await bodies(pool, queue) == [b"kept"]  # nothing dropped for it
