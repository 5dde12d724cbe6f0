"""One queue holds a large backlog, the others little: pops and the lists that count
each queue's messages still walk indexes, never the whole message table.

That spread is the case that went wrong: a stored function's plan is made for any
queue at once, so the planner took every queue to be as large as the busiest and
chose scans of the whole table, which then ran for every pop batch and for every
queue listed. The check is PostgreSQL's own count of sequential scans in the current
transaction (pg_stat_xact_user_tables).
"""

from __future__ import annotations

import asyncpg
import pytest

from courier.db import repository

pytestmark = pytest.mark.slow

BACKLOG = 20_000
QUEUES = 40
CAP = 1000

SCANS_OF_MESSAGES = """
SELECT coalesce(sum(seq_scan), 0) FROM pg_stat_xact_user_tables
WHERE relname IN ('courier_messages_persistent', 'courier_messages_volatile')
"""


@pytest.fixture
async def backlog(repo: repository.Repository, pool: asyncpg.Pool) -> int:
    """A reader's id, with one queue of many holding a large backlog for anyone."""
    sender = await repo.register_client("sender")
    reader = await repo.register_client("reader")
    queues = [(await repo.create_queue(f"q{n}", creator=sender.id)).id for n in range(QUEUES)]
    await repo.create_topic("news", creator=sender.id)
    await pool.execute(
        "INSERT INTO courier_messages (queue_id, sender_id, priority, body)"
        " SELECT $1, $2, 5, '\\x00'::bytea FROM generate_series(1, $3)",
        queues[0], sender.id, BACKLOG,
    )  # fmt: skip
    await pool.execute("ANALYZE courier_messages")
    return reader.id


@pytest.mark.parametrize(
    ("call", "for_reader"),
    [
        ("SELECT * FROM courier_queues_for_me_v2($1, $2)", True),
        ("SELECT * FROM courier_list_queues_v2($1)", False),
        ("SELECT * FROM courier_topics_v1(NULL, NULL, $1)", False),
    ],
)
async def test_a_count_never_scans_the_whole_message_table(
    backlog: int, pool: asyncpg.Pool, call: str, for_reader: bool
) -> None:
    arguments = (backlog, CAP) if for_reader else (CAP,)
    async with pool.acquire() as connection, connection.transaction():
        for _ in range(7):  # past PL/pgSQL's first five custom plans, onto the generic one
            await connection.fetch(call, *arguments)
        scans = await connection.fetchval(SCANS_OF_MESSAGES)
    assert scans == 0


async def test_a_pop_batch_never_scans_the_whole_message_table(
    backlog: int, repo: repository.Repository, pool: asyncpg.Pool
) -> None:
    """The small queue holds a message addressed to one reader, so each reader of the
    batch is also asked whether it holds one of its own."""
    small = await repo.create_queue("small")
    sender = await repo.register_client("small sender")
    await repo.send(sender.id, [small.id], b"for anyone")
    await repo.send(sender.id, [small.id], b"for the reader", receiver=backlog)
    readers = [backlog, sender.id]
    popped: list[bytes] = []
    async with pool.acquire() as connection, connection.transaction():
        for _ in range(7):  # past PL/pgSQL's first five custom plans, onto the generic one
            await repo.send(sender.id, [small.id], b"for the reader", receiver=backlog)
            rows = await connection.fetch(
                "SELECT * FROM courier_pop_batch_v3($1, 'time', $2)", small.id, readers
            )
            popped += [bytes(row["body"]) for row in rows if row["status"] == 0]
        scans = await connection.fetchval(SCANS_OF_MESSAGES)
    assert scans == 0
    # One message per reader and batch: the reader takes one of its own each time.
    assert sorted(popped) == [b"for anyone"] + [b"for the reader"] * 7


async def test_the_counts_stay_right(backlog: int, repo: repository.Repository) -> None:
    listed = await repo.queues_for_me(backlog)
    assert [(queue.name, queue.message_count) for queue in listed] == [
        ("q0", min(BACKLOG, repository.MESSAGE_COUNT_CAP))
    ]
    counts = {queue.name: queue.message_count for queue in await repo.list_queues()}
    assert counts["q0"] == min(BACKLOG, repository.MESSAGE_COUNT_CAP)
    assert {name: count for name, count in counts.items() if name != "q0"} == {
        f"q{n}": 0 for n in range(1, QUEUES)
    }
