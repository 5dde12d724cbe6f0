"""Concurrency rules that live in SQL: pop delivers each message once and locks only
what it takes, so no visible message is missed; creates race safely."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Awaitable
from dataclasses import dataclass, field

import asyncpg
import pytest
from db_helpers import message_count

from courier import errors, models
from courier.db import repository

MESSAGES = 400
POPPERS = 8


@pytest.mark.parametrize("order", list(models.Order))
async def test_concurrent_pops_deliver_every_message_exactly_once(
    dsn: str, order: models.Order
) -> None:
    # One connection per popper, so the pops really run side by side in the database.
    pool = await asyncpg.create_pool(dsn, min_size=POPPERS, max_size=POPPERS)
    try:
        repo = repository.Repository(pool)
        writer = await repo.register_client("writer")
        queue = await repo.create_queue("work")
        sent = []
        for index in range(MESSAGES):
            sent += await repo.send(
                writer.id, [queue.id], f"m{index}".encode(), priority=1 + index % 10
            )

        async def popper(reader_id: int) -> list[int]:
            popped = []
            for _ in range(MESSAGES // POPPERS):
                message = await repo.read(reader_id, queue_id=queue.id, order=order, pop=True)
                popped.append(message.id)
            return popped

        readers = [await repo.register_client(f"reader{n}") for n in range(POPPERS)]
        results = await asyncio.gather(*(popper(reader.id) for reader in readers))

        delivered = [message_id for popped in results for message_id in popped]
        assert len(delivered) == MESSAGES  # every pop returned a message
        assert sorted(delivered) == sorted(sent)  # none twice, none lost
        assert await message_count(pool) == 0
    finally:
        await pool.close()


async def test_a_popper_skips_a_message_locked_by_another(
    repo: repository.Repository, pool: asyncpg.Pool
) -> None:
    writer = await repo.register_client("writer")
    queue = await repo.create_queue("work")
    first, second = [(await repo.send(writer.id, [queue.id], body))[0] for body in (b"a", b"b")]

    async with pool.acquire() as holder, holder.transaction():
        held = await holder.fetchrow(
            "SELECT * FROM courier_read_v3($1, $2, NULL, 'time', true, 0, NULL)",
            writer.id,
            queue.id,
        )
        # The first message is popped but not committed: others skip it without waiting.
        other = await asyncio.wait_for(repo.read(writer.id, queue_id=queue.id, pop=True), 2)
        assert (held["id"], other.id) == (first, second)
        with pytest.raises(errors.QueueEmpty):
            await repo.read(writer.id, queue_id=queue.id, pop=True)


# -- mixed audiences ---------------------------------------------------------------
# Readers A and B each have messages addressed to them, and there are broadcasts that
# both can see; A's poppers pop as many as A has of its own plus `taken_by_a`, B's the
# rest. Every addressed message is older (and of higher priority) than every
# broadcast, so in either order a reader takes a broadcast only when each of its own
# messages is taken or being taken by one of its own pops. Then no interleaving of
# correct pops leaves a reader without a visible message before its budget is spent:
# every pop must return a message. A pop that locks a message it does not take makes
# a concurrent pop skip that message and miss.
#
# Each popper has its own connection and pops in transactions of one to three pops,
# as a caller that commits only once it has handed the messages on would. A lock then
# lasts at least a round trip, so on a small machine the race shows up in many rounds
# instead of once in a while.
MIXED_POPPERS_PER_READER = 3
MIXED_POPS_PER_TRANSACTION = (1, 3)
MIXED_SHAPES = [  # (own A, own B, broadcasts, broadcasts taken by A)
    (0, 30, 1, 1),
    (1, 30, 1, 1),
    (30, 2, 2, 0),
    (2, 30, 2, 2),
    (3, 20, 3, 2),
    (15, 15, 2, 1),
]
MIXED_REPEATS = 3
POP = "SELECT * FROM courier_read_v3($1, $2, NULL, $3, true, 0, NULL)"


@dataclass
class MixedOutcome:
    stored: list[int] = field(default_factory=list)
    delivered: list[tuple[int, asyncpg.Record]] = field(default_factory=list)  # (reader, row)
    empties: list[str] = field(default_factory=list)


async def store_mixed_round(
    pool: asyncpg.Pool, rng: random.Random, writer: int, queue: int,
    receivers: list[int | None],
) -> list[int]:  # fmt: skip
    """Store the messages in one statement, each 1 us younger than the one before;
    addressed ones get priorities 6-10, broadcasts (receiver None) 1-5."""
    priorities = [rng.randint(1, 5) if to is None else rng.randint(6, 10) for to in receivers]
    rows = await pool.fetch(
        "INSERT INTO courier_messages (queue_id, sender_id, receiver_id, priority, body,"
        " created_at) SELECT $1, $2, m.receiver, m.priority, 'm', now() + m.n * interval '1us'"
        " FROM unnest($3::bigint[], $4::smallint[]) WITH ORDINALITY m(receiver, priority, n)"
        " ORDER BY m.n RETURNING id",
        queue, writer, receivers, priorities,
    )  # fmt: skip
    return [row["id"] for row in rows]


def split(total: int, parts: int, rng: random.Random) -> list[int]:
    """total pops shared at random among parts poppers."""
    cuts = sorted(rng.randint(0, total) for _ in range(parts - 1))
    return [b - a for a, b in itertools.pairwise([0, *cuts, total])]


async def pop_in_transactions(
    pool: asyncpg.Pool, rng: random.Random, queue: int, order: models.Order,
    reader: int, pops: int, outcome: MixedOutcome,
) -> None:  # fmt: skip
    async with pool.acquire() as connection:
        while pops:
            batch = min(pops, rng.randint(*MIXED_POPS_PER_TRANSACTION))
            pops -= batch
            async with connection.transaction():
                for _ in range(batch):
                    row = await connection.fetchrow(POP, reader, queue, str(order))
                    if row["status"] == errors.Status.QUEUE_EMPTY:
                        outcome.empties.append(f"reader {reader} found queue {queue} empty")
                    else:
                        outcome.delivered.append((reader, row))


async def pop_mixed_round(
    pool: asyncpg.Pool, rng: random.Random, queue: int, order: models.Order,
    budgets: dict[int, int], outcome: MixedOutcome,
) -> None:  # fmt: skip
    poppers = [
        pop_in_transactions(pool, rng, queue, order, reader, pops, outcome)
        for reader, budget in budgets.items()
        for pops in split(budget, MIXED_POPPERS_PER_READER, rng)
    ]
    rng.shuffle(poppers)  # vary who starts first
    await asyncio.gather(*poppers)


@pytest.mark.parametrize("order", list(models.Order))
async def test_concurrent_pops_of_mixed_audiences_never_miss_a_visible_message(
    dsn: str, order: models.Order
) -> None:
    connections = 2 * MIXED_POPPERS_PER_READER  # one per popper: really side by side
    pool = await asyncpg.create_pool(dsn, min_size=connections, max_size=connections)
    try:
        repo = repository.Repository(pool)
        writer = await repo.register_client("writer")
        a, b = [(await repo.register_client(name)).id for name in ("a", "b")]
        rng = random.Random(f"mixed {order}")
        outcome = MixedOutcome()
        for number in range(MIXED_REPEATS * len(MIXED_SHAPES)):
            own_a, own_b, broadcasts, taken_by_a = MIXED_SHAPES[number % len(MIXED_SHAPES)]
            queue = (await repo.create_queue(f"round{number}")).id
            addressed = [a] * own_a + [b] * own_b
            rng.shuffle(addressed)
            receivers: list[int | None] = [*addressed, *[None] * broadcasts]
            outcome.stored += await store_mixed_round(pool, rng, writer.id, queue, receivers)
            budgets = {a: own_a + taken_by_a, b: own_b + broadcasts - taken_by_a}
            await pop_mixed_round(pool, rng, queue, order, budgets, outcome)

        assert outcome.empties == []  # every pop found a message
        delivered_ids = [row["id"] for _, row in outcome.delivered]
        assert sorted(delivered_ids) == sorted(outcome.stored)  # none twice, none lost
        assert all(row["receiver_id"] in (None, reader) for reader, row in outcome.delivered)
        assert await message_count(pool) == 0
    finally:
        await pool.close()


@pytest.mark.parametrize("order", list(models.Order))
async def test_a_pop_locks_only_the_message_it_takes(
    repo: repository.Repository, pool: asyncpg.Pool, order: models.Order
) -> None:
    writer, a, b = [await repo.register_client(name) for name in ("writer", "a", "b")]
    queue = await repo.create_queue("work")
    # B's own message comes first in either order.
    (for_b,) = await repo.send(writer.id, [queue.id], b"for b", receiver=b.id, priority=9)
    (for_all,) = await repo.send(writer.id, [queue.id], b"for all", priority=1)

    async with pool.acquire() as holder, holder.transaction():
        held = await holder.fetchrow(POP, b.id, queue.id, str(order))
        # B's pop is not committed yet, and it did not take the broadcast: A gets it.
        other = await asyncio.wait_for(repo.read(a.id, queue_id=queue.id, order=order, pop=True), 2)
        assert (held["id"], other.id) == (for_b, for_all)
    assert await message_count(pool) == 0


@pytest.mark.parametrize("order", list(models.Order))
async def test_a_pop_gets_past_more_held_messages_than_one_look_lists(
    repo: repository.Repository, pool: asyncpg.Pool, order: models.Order
) -> None:
    writer, reader = [await repo.register_client(name) for name in ("writer", "reader")]
    queue = await repo.create_queue("work")
    sent = []
    for index in range(10):  # for the reader and for anyone in turn; both orders agree
        receiver = reader.id if index % 2 else None
        sent += await repo.send(writer.id, [queue.id], b"m", receiver=receiver, priority=10 - index)

    async with pool.acquire() as holder, holder.transaction():
        held = [
            (await holder.fetchrow(POP, reader.id, queue.id, str(order)))["id"] for _ in range(9)
        ]

        def read(pop: bool) -> Awaitable[models.Message]:
            reading = repo.read(reader.id, queue_id=queue.id, order=order, pop=pop)
            return asyncio.wait_for(reading, 2)  # none of them waits for the holder

        assert held == sent[:9]
        assert (await read(pop=True)).id == sent[9]
        with pytest.raises(errors.QueueEmpty):  # all the rest are held
            await read(pop=True)
        assert (await read(pop=False)).id == sent[0]  # a peek still sees the oldest
    assert await message_count(pool) == 0


# -- peeks racing pops -------------------------------------------------------------
# A peek reads the head of the queue without a lock while poppers on other
# connections take the head all the time. It must answer with a whole message (one
# the pops take sooner or later) or QUEUE_EMPTY, never with an empty row; it once
# found the head's id and fetched the row by a second statement, which a pop could
# beat (migration 0039 reads the row in the statement that finds it).
RACE_PEEKERS = 3
RACE_POPPERS = 3
RACE_MESSAGES = 1500
READ = "SELECT * FROM courier_read_v3($1, $2, NULL, $3, $4, 0, NULL)"
MESSAGE_COLUMNS = ("id", "queue_id", "sender_id", "priority", "created_at", "body")


async def peek_until_empty(
    pool: asyncpg.Pool, reader: int, queue: int, order: models.Order
) -> list[asyncpg.Record]:
    async with pool.acquire() as connection:
        peeked = []
        while True:
            row = await connection.fetchrow(READ, reader, queue, str(order), False)
            if row["status"] == errors.Status.QUEUE_EMPTY:
                return peeked
            peeked.append(row)


async def pop_until_empty(
    pool: asyncpg.Pool, reader: int, queue: int, order: models.Order
) -> list[int]:
    async with pool.acquire() as connection:
        popped = []
        while True:
            row = await connection.fetchrow(READ, reader, queue, str(order), True)
            if row["status"] == errors.Status.QUEUE_EMPTY:
                return popped
            popped.append(row["id"])


@pytest.mark.parametrize("order", list(models.Order))
async def test_a_peek_racing_pops_returns_a_whole_message_or_queue_empty(
    dsn: str, order: models.Order
) -> None:
    connections = RACE_PEEKERS + RACE_POPPERS  # one per reader: really side by side
    pool = await asyncpg.create_pool(dsn, min_size=connections, max_size=connections)
    try:
        repo = repository.Repository(pool)
        writer = await repo.register_client("writer")
        queue = await repo.create_queue("raced")
        await pool.execute(
            "INSERT INTO courier_messages (queue_id, sender_id, priority, body)"
            " SELECT $1, $2, 1 + n % 10, convert_to('m' || n, 'UTF8')"
            " FROM generate_series(1, $3) n",
            queue.id, writer.id, RACE_MESSAGES,
        )  # fmt: skip
        readers = [
            pop_until_empty(pool, writer.id, queue.id, order) for _ in range(RACE_POPPERS)
        ] + [peek_until_empty(pool, writer.id, queue.id, order) for _ in range(RACE_PEEKERS)]
        results = await asyncio.gather(*readers)

        popped = [message_id for ids in results[:RACE_POPPERS] for message_id in ids]
        peeked = [row for rows in results[RACE_POPPERS:] for row in rows]
        assert len(popped) == len(set(popped)) == RACE_MESSAGES
        incomplete = [dict(row) for row in peeked if row["status"] != 0 or None in (
            row[column] for column in MESSAGE_COLUMNS)]  # fmt: skip
        assert incomplete == []
        assert {row["id"] for row in peeked} <= set(popped)
    finally:
        await pool.close()
