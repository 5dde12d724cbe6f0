"""Reading: selectors, orders, visibility, peek vs pop, and the kinds of miss."""

from __future__ import annotations

import asyncpg
import pytest

from courier import errors, models
from courier.db import repository

TIME = models.Order.TIME
PRIORITY = models.Order.PRIORITY


async def insert_at(
    pool: asyncpg.Pool,
    queue_id: int,
    sender_id: int,
    body: str,
    created_at: str,
    *,
    priority: int = 5,
    receiver: int | None = None,
) -> int:
    """Store a message with a chosen timestamp, behind the repository's back."""
    message_id: int = await pool.fetchval(
        "INSERT INTO courier_messages (queue_id, sender_id, receiver_id, priority, body,"
        " created_at) VALUES ($1, $2, $3, $4, $5, $6::text::timestamptz) RETURNING id",
        queue_id, sender_id, receiver, priority, body.encode(), created_at,
    )  # fmt: skip
    return message_id


async def test_time_order_takes_the_oldest_then_the_lowest_id(
    repo: repository.Repository, pool: asyncpg.Pool, writer: models.ClientInfo
) -> None:
    queue = await repo.create_queue("q")
    newer = await insert_at(pool, queue.id, writer.id, "newer", "2024-01-01 10:00:02+00")
    tie_a = await insert_at(pool, queue.id, writer.id, "tie a", "2024-01-01 10:00:01+00")
    tie_b = await insert_at(pool, queue.id, writer.id, "tie b", "2024-01-01 10:00:01+00")

    popped = [(await repo.read(writer.id, queue_id=queue.id, pop=True)).id for _ in range(3)]

    assert popped == [tie_a, tie_b, newer]


async def test_priority_order_takes_the_highest_then_the_oldest(
    repo: repository.Repository, pool: asyncpg.Pool, writer: models.ClientInfo
) -> None:
    queue = await repo.create_queue("q")
    low = await insert_at(pool, queue.id, writer.id, "low", "2024-01-01 10:00:00+00", priority=2)
    high_new = await insert_at(
        pool, queue.id, writer.id, "high new", "2024-01-01 10:00:09+00", priority=8
    )
    high_old = await insert_at(
        pool, queue.id, writer.id, "high old", "2024-01-01 10:00:05+00", priority=8
    )
    top = await insert_at(pool, queue.id, writer.id, "top", "2024-01-01 10:00:30+00", priority=10)

    popped = [
        (await repo.read(writer.id, queue_id=queue.id, order=PRIORITY, pop=True)).id
        for _ in range(4)
    ]

    assert popped == [top, high_old, high_new, low]


async def test_peek_leaves_the_message_and_pop_removes_it(
    repo: repository.Repository, writer: models.ClientInfo, queue: models.Queue
) -> None:
    (sent,) = await repo.send(writer.id, [queue.id], b"once")

    assert (await repo.read(writer.id, queue_id=queue.id)).id == sent
    assert (await repo.read(writer.id, queue_id=queue.id)).id == sent
    assert (await repo.read(writer.id, queue_id=queue.id, pop=True)).id == sent
    with pytest.raises(errors.QueueEmpty):
        await repo.read(writer.id, queue_id=queue.id, pop=True)


async def test_a_message_for_someone_else_is_invisible(
    repo: repository.Repository,
    writer: models.ClientInfo,
    reader: models.ClientInfo,
    queue: models.Queue,
) -> None:
    await repo.send(writer.id, [queue.id], b"for the writer", receiver=writer.id)
    (for_reader,) = await repo.send(writer.id, [queue.id], b"for the reader", receiver=reader.id)
    (for_all,) = await repo.send(writer.id, [queue.id], b"for anyone")

    seen = [(await repo.read(reader.id, queue_id=queue.id, pop=True)).id for _ in range(2)]

    assert seen == [for_reader, for_all]
    with pytest.raises(errors.QueueEmpty, match="empty for you"):
        await repo.read(reader.id, queue_id=queue.id)
    assert (await repo.read(writer.id, queue_id=queue.id)).body == b"for the writer"


async def test_read_by_sender_spans_queues(
    repo: repository.Repository, writer: models.ClientInfo, reader: models.ClientInfo
) -> None:
    first = await repo.create_queue("first")
    second = await repo.create_queue("second")
    other = await repo.register_client("other")
    await repo.send(other.id, [first.id], b"not from the writer")
    (a,) = await repo.send(writer.id, [second.id], b"a", priority=3)
    (b,) = await repo.send(writer.id, [first.id], b"b", priority=6)

    assert (await repo.read(reader.id, sender_id=writer.id)).id == a
    assert (await repo.read(reader.id, sender_id=writer.id, order=PRIORITY)).id == b
    assert (await repo.read(reader.id, sender_id=writer.id, pop=True)).id == a
    assert (await repo.read(reader.id, sender_id=writer.id, pop=True)).id == b
    with pytest.raises(errors.NoMessage) as caught:
        await repo.read(reader.id, sender_id=writer.id)
    assert type(caught.value) is errors.NoMessage


async def test_read_by_queue_and_sender(
    repo: repository.Repository, writer: models.ClientInfo, reader: models.ClientInfo
) -> None:
    queue = await repo.create_queue("q")
    elsewhere = await repo.create_queue("elsewhere")
    other = await repo.register_client("other")
    await repo.send(other.id, [queue.id], b"other sender", priority=10)
    await repo.send(writer.id, [elsewhere.id], b"other queue", priority=10)
    (low,) = await repo.send(writer.id, [queue.id], b"low", priority=1)
    (high,) = await repo.send(writer.id, [queue.id], b"high", priority=7)

    async def read(order: models.Order = TIME, pop: bool = False) -> int:
        message = await repo.read(
            reader.id, queue_id=queue.id, sender_id=writer.id, order=order, pop=pop
        )
        return message.id

    assert await read() == low
    assert await read(PRIORITY, pop=True) == high
    assert await read(pop=True) == low
    with pytest.raises(errors.QueueEmpty):
        await read()


async def test_the_kinds_of_miss_are_kept_apart(
    repo: repository.Repository, reader: models.ClientInfo, queue: models.Queue
) -> None:
    with pytest.raises(errors.QueueNotFound):
        await repo.read(reader.id, queue_id=999)
    with pytest.raises(errors.QueueNotFound):
        await repo.read(reader.id, queue_id=999, sender_id=reader.id, pop=True)
    with pytest.raises(errors.QueueEmpty):
        await repo.read(reader.id, queue_id=queue.id)
    with pytest.raises(errors.NoMessage) as caught:
        await repo.read(reader.id, sender_id=reader.id)
    assert not isinstance(caught.value, errors.QueueEmpty)
    with pytest.raises(errors.BadRequest):
        await repo.read(reader.id)


async def test_the_repository_refuses_a_message_row_of_nulls(
    repo: repository.Repository, pool: asyncpg.Pool, reader: models.ClientInfo
) -> None:
    # What a peek that lost its message to a pop used to answer: no status, no message.
    # This test's own database gets a read function that always answers so.
    await pool.execute(
        "CREATE OR REPLACE FUNCTION courier_read_v3("
        " p_reader_id bigint, p_queue_id bigint, p_sender_id bigint, p_order text,"
        " p_pop boolean, p_lease_ms integer, p_instance_id bigint,"
        " OUT status smallint, OUT id bigint, OUT queue_id bigint,"
        " OUT sender_id bigint, OUT receiver_id bigint, OUT context bigint,"
        " OUT priority smallint, OUT created_at timestamptz, OUT body bytea,"
        " OUT deliveries integer, OUT delivery_id bigint, OUT dead_from bigint,"
        " OUT failure text, OUT properties jsonb, OUT exec_ns bigint) LANGUAGE sql"
        " AS 'SELECT NULL::smallint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,"
        " NULL::bigint, NULL::smallint, NULL::timestamptz, NULL::bytea, NULL::integer,"
        " NULL::bigint, NULL::bigint, NULL::text, NULL::jsonb, 0::bigint'"
    )
    with pytest.raises(errors.InternalError, match="message row without id, queue_id"):
        await repo.read(reader.id, queue_id=1)


async def test_pop_response_takes_the_message_addressed_to_me_with_that_context(
    repo: repository.Repository,
    writer: models.ClientInfo,
    reader: models.ClientInfo,
    queue: models.Queue,
) -> None:
    await repo.send(writer.id, [queue.id], b"broadcast", context=42)
    await repo.send(writer.id, [queue.id], b"other context", receiver=reader.id, context=41)
    await repo.send(writer.id, [queue.id], b"someone else", receiver=writer.id, context=42)
    (wanted,) = await repo.send(writer.id, [queue.id], b"the reply", receiver=reader.id, context=42)

    reply = await repo.pop_response(reader.id, queue.id, 42)

    assert (reply.id, reply.body, reply.context, reply.receiver) == (
        wanted, b"the reply", 42, reader.id,
    )  # fmt: skip
    with pytest.raises(errors.NoMessage):
        await repo.pop_response(reader.id, queue.id, 42)
    assert (await repo.get_queue(queue.id)).message_count == 3


async def test_pop_response_on_a_missing_queue(
    repo: repository.Repository, reader: models.ClientInfo
) -> None:
    with pytest.raises(errors.QueueNotFound):
        await repo.pop_response(reader.id, 999, 1)


async def test_queues_for_me_counts_what_i_could_read(
    repo: repository.Repository, writer: models.ClientInfo, reader: models.ClientInfo
) -> None:
    nothing_for_me = await repo.create_queue("a")
    mixed = await repo.create_queue("b")
    empty = await repo.create_queue("c")
    mine = await repo.create_queue("d")
    await repo.send(writer.id, [nothing_for_me.id], b"x", receiver=writer.id)
    await repo.send(writer.id, [mixed.id, mine.id], b"for anyone")
    await repo.send(writer.id, [mixed.id], b"for me", receiver=reader.id)
    await repo.send(writer.id, [mixed.id], b"not for me", receiver=writer.id)

    assert await repo.queues_for_me(reader.id) == [
        models.Queue(mixed.id, "b", 2),
        models.Queue(mine.id, "d", 1),
    ]
    assert empty.id not in [queue.id for queue in await repo.queues_for_me(writer.id)]


READABLE_FIRST = 1000
"""courier_queues_for_me_v2 reads up to this many of the reader's messages before it
counts queue by queue (migration 0038)."""

COUNTED_BY_HAND = """
SELECT coalesce(array_agg(c.queue_id ORDER BY c.queue_id), '{}') AS ids,
       coalesce(array_agg(c.name ORDER BY c.queue_id), '{}') AS names,
       coalesce(array_agg(least(c.n, $2) ORDER BY c.queue_id), '{}') AS counts
FROM (SELECT m.queue_id, q.name, count(*) AS n
      FROM courier_messages m JOIN courier_queues q ON q.id = m.queue_id
      WHERE (m.receiver_id IS NULL OR m.receiver_id = $1)
        AND (q.readers IS NULL OR $1 = ANY (q.readers) OR q.created_by = $1)
      GROUP BY m.queue_id, q.name) c
"""
"""What the listing must answer, by a plain count of every message (no limits, no index)."""


async def store_many(
    pool: asyncpg.Pool, queue_id: int, sender_id: int, count: int,
    *, receiver: int | None = None, persistent: bool = True,
) -> None:  # fmt: skip
    await pool.execute(
        "INSERT INTO courier_messages (queue_id, sender_id, receiver_id, priority, body,"
        " persistent) SELECT $1, $2, $3, 5, 'x', $5 FROM generate_series(1, $4)",
        queue_id, sender_id, receiver, count, persistent,
    )  # fmt: skip


READABLE_ELSEWHERE = 11
"""Messages the test below stores for the reader outside the backlogged queue."""


# No backlog; one that makes exactly READABLE_FIRST readable messages; one beyond it.
@pytest.mark.parametrize("backlog", [0, READABLE_FIRST - READABLE_ELSEWHERE, READABLE_FIRST + 200])
@pytest.mark.parametrize("cap", [3, repository.MESSAGE_COUNT_CAP])
async def test_queues_for_me_counts_as_a_plain_count_would_with_few_or_many_to_read(
    repo: repository.Repository,
    pool: asyncpg.Pool,
    writer: models.ClientInfo,
    reader: models.ClientInfo,
    backlog: int,
    cap: int,
) -> None:
    for_anyone, mixed, not_mine, guarded, _empty, backlogged = [
        (await repo.create_queue(name)).id for name in "abcdef"
    ]
    await store_many(pool, for_anyone, writer.id, 5)
    await store_many(pool, for_anyone, writer.id, 2, persistent=False)
    await store_many(pool, mixed, writer.id, 4, receiver=reader.id)
    await store_many(pool, mixed, writer.id, 3, receiver=writer.id)
    await store_many(pool, not_mine, writer.id, 6, receiver=writer.id)
    await store_many(pool, guarded, writer.id, 5)
    await pool.execute(
        "UPDATE courier_queues SET readers = $2, created_by = $3 WHERE id = $1",
        guarded, [writer.id], writer.id,
    )  # fmt: skip
    await store_many(pool, backlogged, writer.id, backlog)

    listed = await pool.fetchrow(
        "SELECT ids, names, message_counts FROM courier_queues_for_me_v2($1, $2)", reader.id, cap
    )
    expected = await pool.fetchrow(COUNTED_BY_HAND, reader.id, cap)

    assert sum(await pool.fetchval(COUNTED_BY_HAND, reader.id, None, column=2)) == (
        READABLE_ELSEWHERE + backlog
    )
    assert (listed["ids"], listed["names"], listed["message_counts"]) == (
        expected["ids"], expected["names"], expected["counts"],
    )  # fmt: skip
    assert set(listed["ids"]) == {for_anyone, mixed} | ({backlogged} if backlog else set())


async def test_queues_for_me_may_be_empty(
    repo: repository.Repository, reader: models.ClientInfo, queue: models.Queue
) -> None:
    assert await repo.queues_for_me(reader.id) == []
