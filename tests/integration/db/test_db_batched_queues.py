"""Creating and deleting queues and listing a reader's queues ride the batched
exchange (migration 0033): each request keeps its own answer and its own error, and a
delete that would wait for a lock runs alone after the batch instead of holding it up."""

from __future__ import annotations

import asyncio
import time

import asyncpg
import pytest
from db_helpers import CountingRepository, message_count
from test_db_batches import until_a_backend_waits_for_a_lock

from courier import errors, models
from courier.db import repository

Create = repository.CreateQueueRequest
Delete = repository.DeleteQueueRequest
Listing = repository.ListingRequest
Send = repository.SendRequest


async def queue_names(pool: asyncpg.Pool) -> set[str]:
    return {row["name"] for row in await pool.fetch("SELECT name FROM courier_queues")}


async def test_queue_requests_in_one_exchange_each_get_their_answer(
    repo: repository.Repository, pool: asyncpg.Pool
) -> None:
    owner, stranger = [await repo.register_client(name) for name in ("owner", "stranger")]
    taken = await repo.create_queue("taken")
    full = await repo.create_queue("full")
    await repo.send(owner.id, [full.id], b"keeps it")
    mine = await repo.create_queue("mine", creator=owner.id)
    doomed = await repo.create_queue("doomed")

    outcome = await repo.exchange([
        Create("fresh", owner.id, 10),
        Create("taken"),
        Create(""),
        Send(owner.id, [taken.id], b"to anyone"),
        Listing(stranger.id),
        Delete(doomed.id),
        Delete(987_654),
        Delete(full.id, if_empty=True),
        Delete(mine.id, actor=stranger.id),
    ])  # fmt: skip

    fresh, exists, nameless, send, listing, deleted, missing, busy, forbidden = outcome.answers
    assert isinstance(fresh, models.Queue) and (fresh.name, fresh.message_count) == ("fresh", 0)
    assert isinstance(exists, errors.QueueExists)
    assert isinstance(nameless, errors.BadRequest)
    assert isinstance(send, list) and len(send) == 1
    # The listing sees the batch's own send: it comes after the sends.
    assert [(q.name, q.message_count) for q in listing] == [("taken", 1), ("full", 1)]
    assert deleted is None
    assert isinstance(missing, errors.QueueNotFound)
    assert isinstance(busy, errors.QueueNotEmpty)
    assert isinstance(forbidden, errors.NotAuthorised)
    assert await queue_names(pool) == {"taken", "full", "mine", "fresh"}
    assert outcome.exec_ns > 0


async def test_a_listing_in_a_batch_answers_what_the_single_call_answers(
    repo: repository.Repository,
) -> None:
    writer, reader, other = [await repo.register_client(n) for n in ("w", "r", "o")]
    queues = [(await repo.create_queue(f"q{n}")).id for n in range(4)]
    await repo.send(writer.id, [queues[0]], b"to anyone")
    await repo.send(writer.id, [queues[1]], b"to the reader", receiver=reader.id)
    await repo.send(writer.id, [queues[2]], b"to another", receiver=other.id)
    for _ in range(3):
        await repo.send(writer.id, [queues[3]], b"more", receiver=reader.id)

    for client in (writer, reader, other):
        alone = await repo.queues_for_me(client.id)
        (batched,) = (await repo.exchange([Listing(client.id)])).answers
        assert batched == alone
    assert [(q.id, q.message_count) for q in await repo.queues_for_me(reader.id)] == [
        (queues[0], 1), (queues[1], 1), (queues[3], 3),
    ]  # fmt: skip


async def test_creates_in_one_batch_keep_the_creators_quota(
    repo: repository.Repository, pool: asyncpg.Pool
) -> None:
    creator = await repo.register_client("creator")
    outcome = await repo.exchange([Create(f"q{n}", creator.id, 2) for n in range(3)])
    created = [answer for answer in outcome.answers if isinstance(answer, models.Queue)]
    refused = [answer for answer in outcome.answers if isinstance(answer, errors.QuotaExceeded)]
    assert (len(created), len(refused)) == (2, 1)
    assert await queue_names(pool) == {queue.name for queue in created}


async def test_a_queue_created_and_deleted_in_one_batch_is_gone(
    repo: repository.Repository, pool: asyncpg.Pool, queue: models.Queue
) -> None:
    created, deleted = (await repo.exchange([Create("brief"), Delete(queue.id)])).answers
    assert isinstance(created, models.Queue) and deleted is None
    assert await queue_names(pool) == {"brief"}


async def test_concurrent_queue_requests_share_calls_with_the_data_path(
    batched: CountingRepository, pool: asyncpg.Pool, writer: models.ClientInfo,
    queue: models.Queue,
) -> None:  # fmt: skip
    made = await asyncio.gather(*(batched.create_queue(f"q{n}") for n in range(20)))
    listed, *_ = await asyncio.gather(
        batched.queues_for_me(writer.id),
        *(batched.send(writer.id, [q.id], b"x") for q in made[:5]),
        *(batched.delete_queue(q.id) for q in made[5:]),
    )
    assert {q.name for q in listed} <= {f"q{n}" for n in range(5)}
    assert await queue_names(pool) == {"jobs"} | {f"q{n}" for n in range(5)}
    kinds = [{type(op) for op in ops} for ops in batched.exchanges]
    assert len(batched.exchanges) < 20 + 1 + 5 + 15  # they really were batched
    assert any(len(k) > 1 for k in kinds)  # queue requests shared calls with sends
    with pytest.raises(errors.QueueExists):
        await batched.create_queue("q1")
    with pytest.raises(errors.QueueNotFound):
        await batched.delete_queue(made[19].id)


async def test_a_delete_that_would_wait_runs_alone_after_the_batch_commits(
    batched: CountingRepository, pool: asyncpg.Pool, writer: models.ClientInfo,
    queue: models.Queue,
) -> None:  # fmt: skip
    busy = await batched.create_queue("busy")
    async with pool.acquire() as holder:
        blocker = holder.transaction()
        await blocker.start()
        # What a send in flight holds on its queue: a delete must wait for it to end.
        await holder.execute("SELECT 1 FROM courier_queues WHERE id = $1 FOR KEY SHARE", busy.id)
        call = asyncio.create_task(
            batched.exchange([Send(writer.id, [queue.id], b"not held up"), Delete(busy.id)])
        )
        deadline = time.monotonic() + 10
        while await message_count(pool) == 0:  # the batch commits without the delete
            assert time.monotonic() < deadline, "the batch waited for the delete's lock"
            await asyncio.sleep(0.01)
        await until_a_backend_waits_for_a_lock(pool)  # the delete, alone, waits
        assert not call.done() and "busy" in await queue_names(pool)
        await blocker.rollback()
        sent, deleted = (await call).answers
    assert isinstance(sent, list) and len(sent) == 1
    assert deleted is None
    assert await queue_names(pool) == {"jobs"}


async def deadlocks(pool: asyncpg.Pool) -> int:
    query = "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
    count: int = await pool.fetchval(query)
    return count


async def test_calls_deleting_each_others_send_targets_never_deadlock(
    repo: repository.Repository, pool: asyncpg.Pool, writer: models.ClientInfo
) -> None:
    # Each call sends to the queue the other deletes: had a delete waited for the
    # other call's key-share lock while holding its own, the two would wait in a cycle.
    before = await deadlocks(pool)
    for round_ in range(20):
        first, second = [(await repo.create_queue(f"r{round_}-{n}")).id for n in (1, 2)]
        answers = await asyncio.gather(
            repo.exchange([Send(writer.id, [first], b"x"), Delete(second)]),
            repo.exchange([Send(writer.id, [second], b"y"), Delete(first)]),
        )
        for sent, deleted in (outcome.answers for outcome in answers):
            # A send that lost the race to its queue's delete finds the queue gone.
            assert isinstance(sent, list | errors.QueueNotFound)
            assert deleted is None
    assert await queue_names(pool) == set()
    await asyncio.sleep(0.1)  # the statistics collector reports a moment late
    assert await deadlocks(pool) == before
