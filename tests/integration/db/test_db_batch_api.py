"""Batches of one client on a real database: a batch send stores all or none, in
order; a batch read takes up to N for its reader only, in read order; batch acks
and nacks answer per delivery; and all of them share one exchange with single
requests, each answered on its own."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from db_helpers import CountingRepository, message_count

from courier import errors, models
from courier.db import repository

Draft = models.Draft


@pytest.fixture
async def lease(repo: repository.Repository) -> repository.Lease:
    """Leases of 30 s through a registered instance."""
    instance = await repo.register_instance("127.0.0.1:7400")
    return repository.Lease(30_000, instance.id)


async def stored_bodies(pool: asyncpg.Pool, queue_id: int) -> list[bytes]:
    rows = await pool.fetch(
        "SELECT body FROM courier_messages WHERE queue_id = $1 ORDER BY id", queue_id
    )
    return [bytes(row["body"]) for row in rows]


async def test_a_batch_is_stored_in_order_with_one_id_per_queue(
    repo: repository.Repository, pool: asyncpg.Pool, writer: models.ClientInfo
) -> None:
    first, second = [(await repo.create_queue(name)).id for name in ("a", "b")]
    bodies = [f"m{k}".encode() for k in range(50)]
    ids = await repo.send_many(writer.id, [first, second], [Draft(body) for body in bodies])
    assert [len(row) for row in ids] == [2] * 50
    assert [row[0] for row in ids] == sorted(row[0] for row in ids)  # ids keep batch order
    assert await stored_bodies(pool, first) == bodies
    assert await stored_bodies(pool, second) == bodies
    popped = await repo.pop_many(writer.id, first, 100)
    assert [message.body for message in popped] == bodies
    assert [message.id for message in popped] == [row[0] for row in ids]


@pytest.mark.parametrize("with_options", [False, True], ids=["set-based", "one-by-one"])
async def test_one_bad_message_fails_the_whole_batch_and_stores_nothing(
    repo: repository.Repository,
    pool: asyncpg.Pool,
    writer: models.ClientInfo,
    queue: models.Queue,
    with_options: bool,
) -> None:
    limited = await repo.create_queue("limited")
    await repo.configure_queue(models.QueueSettings(limited.id, max_messages=3))
    drafts = [Draft(f"m{k}".encode(), ttl_ms=60_000 if with_options else None) for k in range(5)]
    with pytest.raises(errors.QuotaExceeded, match="message 4 of the batch"):
        await repo.send_many(writer.id, [queue.id, limited.id], drafts)
    with pytest.raises(errors.QueueNotFound, match="message 1 of the batch"):
        await repo.send_many(writer.id, [queue.id, 999_999], drafts)
    assert await message_count(pool) == 0
    with pytest.raises(errors.InvalidPriority, match="message 2 of the batch"):
        await repo.send_many(writer.id, [queue.id], [Draft(b"ok"), Draft(b"bad", priority=0)])
    with pytest.raises(errors.BadRequest, match="at least one message"):
        await repo.send_many(writer.id, [queue.id], [])
    assert await message_count(pool) == 0


async def test_a_batch_with_options_delays_expires_and_deduplicates(
    repo: repository.Repository, writer: models.ClientInfo, queue: models.Queue
) -> None:
    drafts = [Draft(b"now"), Draft(b"later", delay_ms=60_000), Draft(b"once", dedup_id="d1")]
    ids = await repo.send_many(writer.id, [queue.id], drafts)
    again = await repo.send_many(writer.id, [queue.id], [Draft(b"once", dedup_id="d1")])
    assert again == [ids[2]]  # the retry stored nothing
    popped = await repo.pop_many(writer.id, queue.id, 10)
    assert [message.body for message in popped] == [b"now", b"once"]  # "later" is hidden


async def test_a_batch_read_takes_only_what_its_reader_may_see_in_read_order(
    repo: repository.Repository, writer: models.ClientInfo, queue: models.Queue
) -> None:
    alice, bob = [await repo.register_client(name) for name in ("alice", "bob")]
    drafts = [
        Draft(b"to bob 1", receiver=bob.id),
        Draft(b"anyone low", priority=2),
        Draft(b"to alice", receiver=alice.id, priority=9),
        Draft(b"anyone high", priority=9),
        Draft(b"to bob 2", receiver=bob.id),
    ]
    await repo.send_many(writer.id, [queue.id], drafts)
    by_priority = await repo.pop_many(alice.id, queue.id, 10, order=models.Order.PRIORITY)
    assert [message.body for message in by_priority] == [b"to alice", b"anyone high", b"anyone low"]
    for_bob = await repo.pop_many(bob.id, queue.id, 10)
    assert [message.body for message in for_bob] == [b"to bob 1", b"to bob 2"]
    assert await repo.pop_many(bob.id, queue.id, 10) == []
    with pytest.raises(errors.QueueNotFound):
        await repo.pop_many(bob.id, 999_999, 10)


async def test_a_leased_batch_read_then_per_delivery_acks(
    repo: repository.Repository,
    writer: models.ClientInfo,
    queue: models.Queue,
    lease: repository.Lease,
) -> None:
    await repo.send_many(writer.id, [queue.id], [Draft(f"job {k}".encode()) for k in range(3)])
    leased = await repo.pop_many(writer.id, queue.id, 3, lease=lease)
    deliveries = [message.delivery for message in leased]
    assert None not in deliveries and len(set(deliveries)) == 3
    assert await repo.pop_many(writer.id, queue.id, 3) == []  # all three are held
    await repo.ack(writer.id, deliveries[1])
    settled = await repo.ack_many(writer.id, [*deliveries, 424_242])  # type: ignore[list-item]
    assert [one.status for one in settled] == [0, errors.Status.LEASE_EXPIRED, 0, 17]
    assert [one.delivery for one in settled] == [*deliveries, 424_242]


async def test_nack_many_gives_each_back_and_reports_each(
    repo: repository.Repository,
    writer: models.ClientInfo,
    queue: models.Queue,
    lease: repository.Lease,
) -> None:
    await repo.send_many(writer.id, [queue.id], [Draft(b"a"), Draft(b"b")])
    leased = await repo.pop_many(writer.id, queue.id, 2, lease=lease)
    deliveries = [message.delivery or 0 for message in leased]
    settled = await repo.nack_many(writer.id, [deliveries[0], 555_555, deliveries[1]])
    assert [one.ok for one in settled] == [True, False, True]
    assert settled[1].status == errors.Status.LEASE_EXPIRED
    again = await repo.pop_many(writer.id, queue.id, 5)
    assert [(message.body, message.deliveries) for message in again] == [(b"a", 1), (b"b", 1)]


async def test_batches_share_one_exchange_with_single_requests_each_answered_alone(
    batched: CountingRepository,
    pool: asyncpg.Pool,
    writer: models.ClientInfo,
    queue: models.Queue,
    lease: repository.Lease,
) -> None:
    await batched.send_many(writer.id, [queue.id], [Draft(b"held 1"), Draft(b"held 2")])
    held = await batched.pop_many(writer.id, queue.id, 2, lease=lease)
    batched.exchanges.clear()
    operations: list[repository.Operation] = [
        repository.SendManyRequest(writer.id, [queue.id], [Draft(b"x1"), Draft(b"x2")]),
        repository.SendManyRequest(writer.id, [queue.id, 999_999], [Draft(b"lost")]),
        repository.SendRequest(writer.id, [queue.id], b"single"),
        repository.AckManyRequest(writer.id, (held[0].delivery or 0, 777_777)),
        repository.AckRequest(writer.id, held[1].delivery or 0),
        repository.PopManyRequest(writer.id, queue.id, 2),
        repository.PopManyRequest(writer.id, 999_999, 2),
        repository.PopRequest(writer.id, queue.id),
    ]
    outcome = await batched.exchange(operations)
    good, missing, single, acks, ack, popped, pop_missing, pop = outcome.answers
    assert len(good) == 2 and isinstance(missing, errors.QueueNotFound)
    assert isinstance(single, list) and ack is None
    assert [one.status for one in acks] == [0, errors.Status.LEASE_EXPIRED]
    # single sends are stored before batch sends, and single pops run before batch reads
    assert pop.body == b"single"
    assert [message.body for message in popped] == [b"x1", b"x2"]
    assert isinstance(pop_missing, errors.QueueNotFound)
    assert await message_count(pool) == 0


async def test_concurrent_batch_readers_get_each_message_exactly_once(
    batched: CountingRepository, writer: models.ClientInfo, queue: models.Queue
) -> None:
    readers = [await batched.register_client(f"reader {k}") for k in range(32)]
    total = 2000
    for start in range(0, total, 500):
        drafts = [Draft(str(k).encode()) for k in range(start, start + 500)]
        await batched.send_many(writer.id, [queue.id], drafts)

    async def drain(reader: models.ClientInfo) -> list[int]:
        taken: list[int] = []
        while batch := await batched.pop_many(reader.id, queue.id, 17):
            taken += [int(message.body) for message in batch]
        return taken

    results = await asyncio.gather(*(drain(reader) for reader in readers))
    every = [number for taken in results for number in taken]
    assert sorted(every) == list(range(total))  # none twice, none left behind
    assert any(size > 1 for size in batched.batches)  # they did share calls


async def test_the_stored_function_checks_what_the_repository_lets_through(
    repo: repository.Repository, pool: asyncpg.Pool, writer: models.ClientInfo, queue: models.Queue
) -> None:
    viewer = await repo.register_client("viewer", models.ClientMode.READ_ONLY)
    call = "SELECT * FROM courier_send_many_v1($1, $2, $3, $4, $5, $6, $7, $8, $9, 65536, 0)"

    async def send_raw(sender: int, queues: list[int], priorities: list[int],
                       receivers: list[int | None]) -> str:  # fmt: skip
        count = len(priorities)
        try:
            nothing = [None] * count
            await pool.fetch(call, sender, queues, [b"m"] * count, receivers, priorities,
                             nothing, [0] * count, nothing, nothing)  # fmt: skip
        except asyncpg.PostgresError as exc:
            return f"{exc.sqlstate} {exc}"
        return "stored"

    assert await send_raw(writer.id, [queue.id], [5, 11], [None, None]) == (
        "CQ011 message 2 of the batch: priority 11 is not from 1 to 10"
    )
    assert await send_raw(viewer.id, [queue.id], [5], [None]) == (
        f"CQ013 message 1 of the batch: client {viewer.id} is read-only"
    )
    assert (await send_raw(writer.id, [queue.id, queue.id], [5], [None])).startswith("CQ010")
    assert (await send_raw(writer.id, [queue.id], [5, 5], [None, 0])).startswith("CQ010")
    assert await message_count(pool) == 0
    assert await send_raw(writer.id, [queue.id], [5, 9], [None, writer.id]) == "stored"
    assert await message_count(pool) == 2


async def test_a_shared_batch_read_keeps_priority_order(
    repo: repository.Repository, writer: models.ClientInfo, queue: models.Queue
) -> None:
    reader = await repo.register_client("only shared")
    priorities = [3, 9, 1, 9, 5]
    await repo.send_many(writer.id, [queue.id], [Draft(str(k).encode(), priority=p)
                                                 for k, p in enumerate(priorities)])  # fmt: skip
    taken = await repo.pop_many(reader.id, queue.id, 3, order=models.Order.PRIORITY)
    assert [message.body for message in taken] == [b"1", b"3", b"4"]
    rest = await repo.pop_many(reader.id, queue.id, 10)
    assert [message.body for message in rest] == [b"0", b"2"]
