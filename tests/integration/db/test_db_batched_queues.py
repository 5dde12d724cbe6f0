"""Creating and deleting queues and listing a reader's queues ride the batched
exchange (migration 0033): each request keeps its own answer and its own error, and a
delete that would wait for a lock runs alone after the batch instead of holding it up."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from db_helpers import CountingRepository, message_count, until_a_backend_waits_for_a_lock

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


async def test_a_create_and_a_delete_in_one_call_both_take_effect(
    repo: repository.Repository, pool: asyncpg.Pool, queue: models.Queue
) -> None:
    created, deleted = (await repo.exchange([Create("brief"), Delete(queue.id)])).answers
    assert isinstance(created, models.Queue) and deleted is None
    assert await queue_names(pool) == {"brief"}
    (gone,) = (await repo.exchange([Delete(created.id)])).answers
    assert gone is None and await queue_names(pool) == set()


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
    assert max(batched.batches) > 1  # they really were batched
    kinds = [{type(op) for op in ops} for ops in batched.exchanges]
    assert any(len(k) > 1 for k in kinds)  # queue requests shared calls with sends
    with pytest.raises(errors.QueueExists):
        await batched.create_queue("q1")
    with pytest.raises(errors.QueueNotFound):
        await batched.delete_queue(made[19].id)


async def test_a_delete_that_would_wait_is_left_out_and_its_caller_waits_alone(
    batched: CountingRepository, pool: asyncpg.Pool, writer: models.ClientInfo,
    queue: models.Queue,
) -> None:  # fmt: skip
    busy = await batched.create_queue("busy")
    async with pool.acquire() as holder:
        blocker = holder.transaction()
        await blocker.start()
        # What a send in flight holds on its queue: a delete must wait for it to end.
        await holder.execute("SELECT 1 FROM courier_queues WHERE id = $1 FOR KEY SHARE", busy.id)
        sent, left_out = (
            await batched.exchange([Send(writer.id, [queue.id], b"not held up"), Delete(busy.id)])
        ).answers
        assert isinstance(sent, list) and left_out is repository.LEFT_OUT
        assert await message_count(pool) == 1 and "busy" in await queue_names(pool)

        deleting = asyncio.create_task(batched.delete_queue(busy.id))
        await until_a_backend_waits_for_a_lock(pool)
        await batched.send(writer.id, [queue.id], b"the batcher is free")
        assert not deleting.done()
        await blocker.rollback()
        await deleting
    assert await queue_names(pool) == {"jobs"}


async def test_a_create_that_would_wait_is_left_out_and_its_caller_waits_alone(
    batched: CountingRepository, pool: asyncpg.Pool, writer: models.ClientInfo,
    queue: models.Queue,
) -> None:  # fmt: skip
    async with pool.acquire() as holder:
        blocker = holder.transaction()
        await blocker.start()
        # A create of the same name, not yet committed: a second must wait for its end.
        await holder.execute("INSERT INTO courier_queues (name) VALUES ('contested')")
        left_out, sent = (
            await batched.exchange([Create("contested"), Send(writer.id, [queue.id], b"x")])
        ).answers
        assert left_out is repository.LEFT_OUT and isinstance(sent, list)

        creating = asyncio.create_task(batched.create_queue("contested"))
        await until_a_backend_waits_for_a_lock(pool)
        await batched.send(writer.id, [queue.id], b"the batcher is free")
        assert not creating.done()
        await blocker.rollback()
        created = await creating
    assert created.name == "contested" and await message_count(pool) == 2


async def test_the_delete_of_a_long_queue_is_left_out_of_the_call(
    repo: repository.Repository, pool: asyncpg.Pool, writer: models.ClientInfo
) -> None:
    short, long = [(await repo.create_queue(name)).id for name in ("short", "long")]
    await repo.send_many(writer.id, [short], [models.Draft(b"m")] * 64)
    await repo.send_many(writer.id, [long], [models.Draft(b"m")] * 65)
    deleted, left_out = (await repo.exchange([Delete(short), Delete(long)])).answers
    assert deleted is None and left_out is repository.LEFT_OUT
    assert await queue_names(pool) == {"long"}


async def test_calls_deleting_each_others_send_targets_never_deadlock(
    repo: repository.Repository, pool: asyncpg.Pool, writer: models.ClientInfo
) -> None:
    # Each call sends to the queue the other deletes: had a delete waited for the
    # other call's key-share lock while holding its own, the two would wait in a
    # cycle, and PostgreSQL would end one of the calls with an error.
    for round_ in range(20):
        first, second = [(await repo.create_queue(f"r{round_}-{n}")).id for n in (1, 2)]
        outcomes = await asyncio.gather(
            repo.exchange([Send(writer.id, [first], b"x"), Delete(second)]),
            repo.exchange([Send(writer.id, [second], b"y"), Delete(first)]),
        )
        for (sent, deleted), doomed in zip(
            (outcome.answers for outcome in outcomes), (second, first), strict=True
        ):
            # A send that lost the race to its queue's delete finds the queue gone.
            assert isinstance(sent, list | errors.QueueNotFound)
            if deleted is repository.LEFT_OUT:  # what the batched repository does
                await repo.delete_queue(doomed)
            else:
                assert deleted is None
    assert await queue_names(pool) == set()


async def test_deleting_queues_runs_on_plans_made_once(
    repo: repository.Repository, pool: asyncpg.Pool, dsn: str
) -> None:
    """Under the default plan cache mode every statement of a queue delete on the
    partitioned messages table (the batch's and the function's checks, and the cascade
    to the messages, which runs under the deleting function's settings) was planned
    afresh: about 15% of the database's CPU in the lab's standard cycle. The functions
    pin their plans; and deletes past the first five (PL/pgSQL's custom plans) still
    take their messages with them."""
    pinned = await pool.fetch(
        "SELECT proname FROM pg_proc WHERE proname = ANY ($1)"
        " AND 'plan_cache_mode=force_generic_plan' = ANY (proconfig)",
        ["courier_exchange_v7", "courier_delete_queue_v1"],
    )
    assert sorted(row["proname"] for row in pinned) == [
        "courier_delete_queue_v1", "courier_exchange_v7",
    ]  # fmt: skip
    sender = await repo.register_client("sender")
    one_session = await asyncpg.create_pool(dsn, min_size=1, max_size=1)
    try:
        deleting = repository.Repository(one_session)
        for round_ in range(8):
            queue = await repo.create_queue(f"short-lived-{round_}")
            await repo.send(sender.id, [queue.id], b"goes with its queue")
            assert (await deleting.exchange([Delete(queue.id)])).answers == [None]
    finally:
        await one_session.close()
    assert await message_count(pool) == 0
