"""The lists that count each queue's messages walk each queue's index, however the
messages are spread.

One queue with a backlog among many empty ones is the case that went wrong: the
count's plan is made for any queue at once, so the planner took every queue to hold
thousands of messages and a scan of the whole table to be cheaper than an index
walk, and each listed queue read the whole table. The check is PostgreSQL's own
count of sequential scans in the current transaction (pg_stat_xact_user_tables).
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
