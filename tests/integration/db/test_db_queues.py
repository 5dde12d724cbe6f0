"""Queues: creation, lookup, listing with counts, deletion with and without if_empty."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from db_helpers import message_count

from courier import errors, models
from courier.db import repository


async def test_create_then_look_up_by_id_and_name(repo: repository.Repository) -> None:
    created = await repo.create_queue("jobs")

    assert created == models.Queue(created.id, "jobs", 0)
    assert await repo.get_queue(created.id) == created
    assert await repo.get_queue("jobs") == created


async def test_duplicate_name_is_refused(repo: repository.Repository) -> None:
    await repo.create_queue("jobs")
    with pytest.raises(errors.QueueExists):
        await repo.create_queue("jobs")
    assert [queue.name for queue in await repo.list_queues()] == ["jobs"]


@pytest.mark.parametrize("name", ["", "q" * 256])
async def test_bad_names_are_refused(repo: repository.Repository, name: str) -> None:
    with pytest.raises(errors.BadRequest):
        await repo.create_queue(name)


async def test_concurrent_creates_of_one_name_let_exactly_one_succeed(
    repo: repository.Repository, pool: asyncpg.Pool
) -> None:
    # Hold the first insert's transaction open so the second really overlaps it.
    async with pool.acquire() as holder, holder.transaction():
        await holder.fetchrow("SELECT * FROM courier_create_queue_v1('race')")
        rival = asyncio.create_task(repo.create_queue("race"))
        await asyncio.sleep(0.2)
        assert not rival.done()  # it waits for the open transaction
    with pytest.raises(errors.QueueExists):
        await rival

    outcomes = await asyncio.gather(
        *(repo.create_queue("crowd") for _ in range(8)), return_exceptions=True
    )
    assert sum(isinstance(outcome, models.Queue) for outcome in outcomes) == 1
    assert sum(isinstance(outcome, errors.QueueExists) for outcome in outcomes) == 7


@pytest.mark.parametrize("key", [999, "missing"])
async def test_unknown_queue_is_not_found(repo: repository.Repository, key: int | str) -> None:
    with pytest.raises(errors.QueueNotFound):
        await repo.get_queue(key)


async def test_list_gives_all_queues_by_id_with_counts(
    repo: repository.Repository, writer: models.ClientInfo
) -> None:
    first = await repo.create_queue("b-first")
    second = await repo.create_queue("a-second")
    await repo.send(writer.id, [first.id], b"one")
    await repo.send(writer.id, [first.id, second.id], b"two", receiver=4242)

    assert await repo.list_queues() == [
        models.Queue(first.id, "b-first", 2),
        models.Queue(second.id, "a-second", 1),
    ]
    assert (await repo.get_queue(first.id)).message_count == 2


async def test_list_of_no_queues_is_empty(repo: repository.Repository) -> None:
    assert await repo.list_queues() == []


async def test_delete_removes_the_queue_and_its_messages(
    repo: repository.Repository, pool: asyncpg.Pool, writer: models.ClientInfo
) -> None:
    doomed = await repo.create_queue("doomed")
    kept = await repo.create_queue("kept")
    await repo.send(writer.id, [doomed.id, kept.id], b"hello")

    await repo.delete_queue(doomed.id)

    with pytest.raises(errors.QueueNotFound):
        await repo.get_queue(doomed.id)
    assert await message_count(pool) == 1
    assert (await repo.get_queue(kept.id)).message_count == 1


async def test_deleting_a_queue_reads_no_other_queue(pool: asyncpg.Pool) -> None:
    """Among many queues, a delete (dead letter references cleared included) finds
    what it touches through indexes: the transaction makes no sequential scan of
    the queue table."""
    async with pool.acquire() as connection:
        await connection.execute(
            "INSERT INTO courier_queues (name) SELECT 'q' || n FROM generate_series(1, 5000) n"
        )
        await connection.execute("ANALYZE courier_queues")
        doomed, refers = await connection.fetchval(
            "SELECT array_agg(id ORDER BY id) FROM courier_queues WHERE name IN ('q1', 'q2')"
        )
        await connection.execute(
            "UPDATE courier_queues SET dead_letter_queue_id = $1 WHERE id = $2", doomed, refers
        )
        count_scans = "SELECT pg_stat_get_xact_numscans('courier_queues'::regclass)"
        async with connection.transaction():
            # The count may hold earlier transactions not yet flushed: take the change.
            before = await connection.fetchval(count_scans)
            await connection.fetchval(
                "SELECT exec_ns FROM courier_delete_queue_v1($1, false)", doomed
            )
            scans = await connection.fetchval(count_scans) - before
        left = await connection.fetchval(
            "SELECT dead_letter_queue_id FROM courier_queues WHERE id = $1", refers
        )
    assert scans == 0
    assert left is None


async def test_deleting_a_queue_without_subscriptions_runs_no_subscription_trigger(
    repo: repository.Repository, pool: asyncpg.Pool
) -> None:
    """The trigger that drops a removed subscription's queue runs per subscription
    removed, not on every delete of a queue (whose cascade into the subscriptions
    is a statement even when it removes none)."""
    queue = await repo.create_queue("plain")
    async with pool.acquire() as connection:
        if not await connection.fetchval(
            "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"
        ):
            pytest.skip("counting function calls (track_functions) needs a superuser")
    async with pool.acquire() as connection, connection.transaction():
        await connection.execute("SET LOCAL track_functions = 'pl'")
        await connection.fetchval(
            "SELECT exec_ns FROM courier_delete_queue_v1($1, false)", queue.id
        )
        calls = await connection.fetchval(
            "SELECT pg_stat_get_xact_function_calls("
            "'courier_drop_subscription_queues_v1()'::regprocedure)"
        )
    assert calls is None  # never called in this transaction
    with pytest.raises(errors.QueueNotFound):
        await repo.get_queue(queue.id)


async def test_delete_if_empty_refuses_while_messages_remain(
    repo: repository.Repository, pool: asyncpg.Pool, writer: models.ClientInfo
) -> None:
    queue = await repo.create_queue("busy")
    await repo.send(writer.id, [queue.id], b"still here")

    with pytest.raises(errors.QueueNotEmpty):
        await repo.delete_queue(queue.id, if_empty=True)
    assert (await repo.get_queue(queue.id)).message_count == 1

    await repo.read(writer.id, queue_id=queue.id, pop=True)
    await repo.delete_queue(queue.id, if_empty=True)
    assert await repo.list_queues() == []
    assert await message_count(pool) == 0


async def test_delete_of_unknown_queue_is_not_found(repo: repository.Repository) -> None:
    with pytest.raises(errors.QueueNotFound):
        await repo.delete_queue(999)


async def test_a_client_creates_at_most_its_quota_of_queues_even_when_racing(
    repo: repository.Repository, writer: models.ClientInfo
) -> None:
    await repo.create_queue("mine-0", creator=writer.id, max_queues=3)
    racing = [repo.create_queue(f"mine-{n}", creator=writer.id, max_queues=3) for n in (1, 2, 3)]
    outcomes = await asyncio.gather(*racing, return_exceptions=True)
    assert sum(isinstance(outcome, models.Queue) for outcome in outcomes) == 2
    assert sum(isinstance(outcome, errors.QuotaExceeded) for outcome in outcomes) == 1
    await repo.create_queue("admin-made", max_queues=3)  # no creator: no quota
    assert len(await repo.list_queues()) == 4


async def test_message_counts_stop_at_the_cap(
    repo: repository.Repository, writer: models.ClientInfo, pool: asyncpg.Pool
) -> None:
    queue = await repo.create_queue("deep")
    await pool.execute(
        "INSERT INTO courier_messages (queue_id, sender_id, priority, body)"
        " SELECT $1, $2, 5, 'x' FROM generate_series(1, $3)",
        queue.id, writer.id, repository.MESSAGE_COUNT_CAP + 5,
    )  # fmt: skip
    assert await message_count(pool) == repository.MESSAGE_COUNT_CAP + 5
    assert (await repo.get_queue(queue.id)).message_count == repository.MESSAGE_COUNT_CAP
    assert [q.message_count for q in await repo.list_queues()] == [repository.MESSAGE_COUNT_CAP]
    (mine,) = await repo.queues_for_me(writer.id)
    assert mine.message_count == repository.MESSAGE_COUNT_CAP
