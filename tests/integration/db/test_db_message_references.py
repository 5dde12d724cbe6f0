"""A stored message's queue and sender exist (migration 0036): one check per statement
in place of a foreign key's check per row, with the same locks, so a queue deleted
while a send is in flight takes that send's messages with it, and a send after the
delete is refused."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from db_helpers import message_count, open_transaction, until_a_backend_waits_for_a_lock

from courier import errors, models
from courier.db import repository

STORE = """
INSERT INTO courier_messages (queue_id, sender_id, priority, body)
SELECT q, $2, 5, 'x' FROM unnest($1::bigint[]) q"""


async def test_a_statement_storing_in_a_missing_queue_fails_whole(
    pool: asyncpg.Pool, writer: models.ClientInfo, queue: models.Queue
) -> None:
    with pytest.raises(asyncpg.PostgresError) as raised:
        await pool.execute(STORE, [queue.id, 987_654], writer.id)
    assert raised.value.sqlstate == "CQ001"
    assert "queue 987654 does not exist" in str(raised.value)
    assert await message_count(pool) == 0


async def test_a_statement_storing_for_a_missing_sender_fails_whole(
    pool: asyncpg.Pool, writer: models.ClientInfo, queue: models.Queue
) -> None:
    with pytest.raises(asyncpg.PostgresError) as raised:
        await pool.execute(STORE, [queue.id, queue.id], 987_654)
    assert raised.value.sqlstate == "CQ006"
    assert await message_count(pool) == 0


async def test_a_send_to_a_missing_queue_is_answered_queue_not_found(
    repo: repository.Repository, writer: models.ClientInfo
) -> None:
    with pytest.raises(errors.QueueNotFound):
        await repo.send(writer.id, [987_654], b"nowhere")


async def test_a_delete_waits_for_a_send_in_flight_and_takes_its_messages(
    dsn: str, pool: asyncpg.Pool, repo: repository.Repository, writer: models.ClientInfo,
    queue: models.Queue,
) -> None:  # fmt: skip
    async with open_transaction(dsn, STORE, [queue.id, queue.id], writer.id) as commit:
        deleting = asyncio.ensure_future(repo.delete_queue(queue.id))
        await until_a_backend_waits_for_a_lock(pool)
        assert not deleting.done()
        await commit()
        await asyncio.wait_for(deleting, 10)
    assert await message_count(pool) == 0


async def test_a_send_after_a_delete_it_waited_for_is_refused(
    dsn: str, pool: asyncpg.Pool, writer: models.ClientInfo, queue: models.Queue
) -> None:
    deleting = "DELETE FROM courier_queues WHERE id = $1"
    async with open_transaction(dsn, deleting, queue.id) as commit:
        storing = asyncio.ensure_future(pool.execute(STORE, [queue.id], writer.id))
        await until_a_backend_waits_for_a_lock(pool)
        await commit()
        with pytest.raises(asyncpg.PostgresError) as raised:
            await asyncio.wait_for(storing, 10)
    assert raised.value.sqlstate == "CQ001"
    assert await message_count(pool) == 0


async def test_deleting_a_queue_deletes_its_messages_and_no_others(
    pool: asyncpg.Pool, repo: repository.Repository, writer: models.ClientInfo
) -> None:
    doomed, kept = await repo.create_queue("doomed"), await repo.create_queue("kept")
    await repo.send(writer.id, [doomed.id, kept.id], b"to both")
    await repo.send(writer.id, [doomed.id], b"to the doomed one")
    await repo.delete_queue(doomed.id)
    rows = await pool.fetch("SELECT queue_id, body FROM courier_messages")
    assert [(row["queue_id"], bytes(row["body"])) for row in rows] == [(kept.id, b"to both")]
