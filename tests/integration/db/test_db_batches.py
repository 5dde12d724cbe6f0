"""The batched data path on a real database: per-request answers, all-or-nothing per
request, order within a batch, and exactly-once pops with no false empty when
batches of mixed audiences race."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import asyncpg
import pytest
from db_helpers import CountingRepository, message_count, until_a_backend_waits_for_a_lock
from test_db_concurrency import MIXED_SHAPES, MixedOutcome, store_mixed_round

from courier import config, errors, models
from courier.db import batching, repository

Send = repository.SendRequest


async def stored_bodies(pool: asyncpg.Pool) -> list[str]:
    return [
        bytes(row["body"]).decode()
        for row in await pool.fetch("SELECT body FROM courier_messages ORDER BY id")
    ]


async def test_one_bad_request_in_a_batch_fails_alone(
    repo: repository.Repository, pool: asyncpg.Pool
) -> None:
    writer, reader = [await repo.register_client(name) for name in ("writer", "reader")]
    viewer = await repo.register_client("viewer", models.ClientMode.READ_ONLY)
    queue, other = [(await repo.create_queue(name)).id for name in ("jobs", "other")]
    outcome = await repo.send_each([
        Send(writer.id, [queue], b"good 1"),
        Send(writer.id, [queue, 999_999], b"to a missing queue"),
        Send(writer.id, [queue], b"bad priority", priority=11),
        Send(viewer.id, [queue], b"from a read-only client"),
        Send(writer.id, [queue, queue], b"a queue twice"),
        Send(424_242, [queue], b"from nobody"),
        Send(writer.id, [], b"to no queue"),
        Send(writer.id, [queue, other], b"good 2", receiver=reader.id),
    ])  # fmt: skip

    answers = outcome.answers
    good_ids = [answers[0], answers[7]]
    assert all(isinstance(ids, list) for ids in good_ids)
    assert [len(ids) for ids in good_ids] == [1, 2]  # type: ignore[arg-type]
    expected_errors = [
        errors.QueueNotFound, errors.InvalidPriority, errors.NotAuthorised, errors.BadRequest,
        errors.ClientNotFound, errors.BadRequest,
    ]  # fmt: skip
    for answer, kind in zip(answers[1:7], expected_errors, strict=True):
        assert type(answer) is kind, answer
    assert "999999" in str(answers[1])
    # Only the good requests were stored, each whole.
    assert await stored_bodies(pool) == ["good 1", "good 2", "good 2"]


ONE_REFUSAL = {
    "missing queue": (lambda w, v, q: Send(w, [q, 999_999], b"bad"), errors.QueueNotFound),
    "priority": (lambda w, v, q: Send(w, [q], b"bad", priority=0), errors.InvalidPriority),
    "read-only sender": (lambda w, v, q: Send(v, [q], b"bad"), errors.NotAuthorised),
    "queue twice": (lambda w, v, q: Send(w, [q, q], b"bad"), errors.BadRequest),
    "no sender": (lambda w, v, q: Send(424_242, [q], b"bad"), errors.ClientNotFound),
    "no queue": (lambda w, v, q: Send(w, [], b"bad"), errors.BadRequest),
    "bad receiver": (lambda w, v, q: Send(w, [q], b"bad", receiver=-1), errors.BadRequest),
}


@pytest.mark.parametrize("case", ONE_REFUSAL)
async def test_a_single_refusal_among_plain_sends_is_caught(
    repo: repository.Repository, pool: asyncpg.Pool, case: str
) -> None:
    """A batch whose one bad request is its only flaw must still leave the plain
    insert for the checked path: the bad one fails, the good ones are stored."""
    writer = await repo.register_client("writer")
    viewer = await repo.register_client("viewer", models.ClientMode.READ_ONLY)
    queue = (await repo.create_queue("jobs")).id
    make_bad, error = ONE_REFUSAL[case]
    outcome = await repo.send_each([
        Send(writer.id, [queue], b"good 1"), make_bad(writer.id, viewer.id, queue),
        Send(writer.id, [queue], b"good 2"),
    ])  # fmt: skip

    assert type(outcome.answers[1]) is error, outcome.answers[1]
    assert all(isinstance(ids, list) for ids in (outcome.answers[0], outcome.answers[2]))
    assert await stored_bodies(pool) == ["good 1", "good 2"]


async def test_a_batch_whose_copies_name_no_such_request_is_answered_per_request(
    repo: repository.Repository, pool: asyncpg.Pool
) -> None:
    """Arrays a caller got wrong (a copy of request 3 in a batch of two) must not
    reach the bare insert: each real request is answered, nothing is half-stored."""
    writer = await repo.register_client("writer")
    queue = (await repo.create_queue("jobs")).id
    rows = await pool.fetch(
        "SELECT * FROM courier_send_batch_v3($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        [writer.id, writer.id], [b"one", b"two"], [None, None], [5, 5], [None, None],
        [True, True], [1, 3], [queue, queue], 1_000_000,
    )  # fmt: skip

    statuses = {row["request"]: row["status"] for row in rows}
    assert statuses == {1: 0, 2: errors.Status.BAD_REQUEST}
    assert await stored_bodies(pool) == ["one"]


async def test_a_batch_keeps_its_order_in_ids_and_time(
    repo: repository.Repository, writer: models.ClientInfo, queue: models.Queue
) -> None:
    bodies = [f"m{n}".encode() for n in range(20)]
    outcome = await repo.send_each([Send(writer.id, [queue.id], body) for body in bodies])
    ids = [answer[0] for answer in outcome.answers]  # type: ignore[index]
    assert ids == sorted(ids)
    popped = await repo.pop_each(queue.id, models.Order.TIME, [writer.id] * 21)
    messages = popped.answers[:20]
    assert [message.body for message in messages] == bodies  # type: ignore[union-attr]
    assert [message.id for message in messages] == ids  # type: ignore[union-attr]
    assert isinstance(popped.answers[20], errors.QueueEmpty)


async def test_a_pop_batch_serves_each_reader_only_what_it_may_see(
    repo: repository.Repository, writer: models.ClientInfo, queue: models.Queue
) -> None:
    a, b = [(await repo.register_client(name)).id for name in ("a", "b")]
    for body, receiver in [(b"for a", a), (b"for all", None), (b"for b", b), (b"for a 2", a)]:
        await repo.send(writer.id, [queue.id], body, receiver=receiver)

    popped = await repo.pop_each(queue.id, models.Order.TIME, [b, a, b, a, a])
    # In request order, each takes the oldest message it may see that is still there.
    bodies = [getattr(answer, "body", None) for answer in popped.answers]
    assert bodies == [b"for all", b"for a", b"for b", b"for a 2", None]
    assert isinstance(popped.answers[4], errors.QueueEmpty)


async def test_a_pop_batch_on_a_missing_queue_fails_every_request(
    repo: repository.Repository, writer: models.ClientInfo
) -> None:
    popped = await repo.pop_each(123_456, models.Order.PRIORITY, [writer.id, writer.id])
    assert all(isinstance(answer, errors.QueueNotFound) for answer in popped.answers)


async def test_concurrent_sends_share_a_call_and_keep_their_answers(
    batched: CountingRepository, pool: asyncpg.Pool, writer: models.ClientInfo,
    queue: models.Queue,
) -> None:  # fmt: skip
    sends = [
        batched.send(writer.id, [queue.id] if n != 7 else [queue.id, 777_777], b"m%d" % n)
        for n in range(40)
    ]
    outcomes = await asyncio.gather(*sends, return_exceptions=True)

    assert isinstance(outcomes[7], errors.QueueNotFound)
    assert all(isinstance(ids, list) and len(ids) == 1 for n, ids in enumerate(outcomes) if n != 7)
    assert len(batched.batches) < 40  # they really were batched
    assert sorted(await stored_bodies(pool)) == sorted(f"m{n}" for n in range(40) if n != 7)


async def test_a_batch_the_database_refuses_whole_stores_nothing_half(
    batched: CountingRepository, pool: asyncpg.Pool, writer: models.ClientInfo,
    queue: models.Queue,
) -> None:  # fmt: skip
    # A context past 64 bits fails the whole call (its arguments cannot be encoded):
    # nothing of that batch is stored, then each request runs alone and only the bad
    # one fails.
    contexts = [None, None, 2**63, None]
    outcomes = await asyncio.gather(
        *(
            batched.send(writer.id, [queue.id], body, context=context)
            for body, context in zip([b"a", b"b", b"too big", b"c"], contexts, strict=True)
        ),
        return_exceptions=True,
    )
    assert isinstance(outcomes[2], errors.BadRequest)
    assert [len(ids) for ids in outcomes if isinstance(ids, list)] == [1, 1, 1]
    assert sorted(await stored_bodies(pool)) == ["a", "b", "c"]
    assert batched.batches == [4]  # the refused batch; then each ran alone, as a single call


async def test_batched_pops_go_through_one_call_per_queue_and_order(
    batched: CountingRepository, pool: asyncpg.Pool, writer: models.ClientInfo,
    queue: models.Queue,
) -> None:  # fmt: skip
    for n in range(10):
        await batched.send(writer.id, [queue.id], f"m{n}".encode(), priority=1 + n)
    by_priority = [
        batched.read(writer.id, queue_id=queue.id, order=models.Order.PRIORITY, pop=True)
        for _ in range(5)
    ]
    first = await asyncio.gather(*by_priority)
    assert [message.priority for message in first] == [10, 9, 8, 7, 6]
    rest = await asyncio.gather(
        *(batched.read(writer.id, queue_id=queue.id, pop=True) for _ in range(6)),
        return_exceptions=True,
    )
    assert [getattr(m, "body", None) for m in rest[:5]] == [f"m{n}".encode() for n in range(5)]
    assert isinstance(rest[5], errors.QueueEmpty)
    assert await message_count(pool) == 0


# -- racing batches of mixed audiences ------------------------------------------------
# The rounds of test_db_concurrency's mixed-audience test, popped by racing batches:
# each reader's pops are dealt into batches of one to four requests that mix readers,
# and the batches run on their own connections, some two to a transaction so locks
# last longer. Every pop must find a message, none twice.
RACING_CONNECTIONS = 6


async def pop_batches(
    pool: asyncpg.Pool, rng: random.Random, queue: int, order: models.Order,
    batches: list[list[int]], outcome: MixedOutcome,
) -> None:  # fmt: skip
    async with pool.acquire() as connection:
        while batches:
            held = batches[: rng.randint(1, 2)]
            del batches[: len(held)]
            async with connection.transaction():
                for readers in held:
                    rows = await connection.fetch(
                        "SELECT * FROM courier_pop_batch_v3($1, $2, $3)", queue, str(order), readers
                    )
                    for row in rows:
                        reader = readers[row["request"] - 1]
                        if row["status"] == errors.Status.QUEUE_EMPTY:
                            outcome.empties.append(f"reader {reader} found queue {queue} empty")
                        else:
                            outcome.delivered.append((reader, row))


@pytest.mark.parametrize("order", list(models.Order))
async def test_racing_pop_batches_of_mixed_audiences_never_miss_a_visible_message(
    dsn: str, order: models.Order
) -> None:
    pool = await asyncpg.create_pool(dsn, min_size=RACING_CONNECTIONS, max_size=RACING_CONNECTIONS)
    try:
        repo = repository.Repository(pool)
        writer = await repo.register_client("writer")
        a, b = [(await repo.register_client(name)).id for name in ("a", "b")]
        rng = random.Random(f"batches {order}")
        outcome = MixedOutcome()
        for number in range(3 * len(MIXED_SHAPES)):
            own_a, own_b, broadcasts, taken_by_a = MIXED_SHAPES[number % len(MIXED_SHAPES)]
            queue = (await repo.create_queue(f"round{number}")).id
            addressed = [a] * own_a + [b] * own_b
            rng.shuffle(addressed)
            receivers: list[int | None] = [*addressed, *[None] * broadcasts]
            outcome.stored += await store_mixed_round(pool, rng, writer.id, queue, receivers)
            pops = [a] * (own_a + taken_by_a) + [b] * (own_b + broadcasts - taken_by_a)
            rng.shuffle(pops)
            batches: list[list[int]] = []
            while pops:
                size = rng.randint(1, 4)
                batches.append(pops[:size])
                del pops[:size]
            await asyncio.gather(*(
                pop_batches(pool, rng, queue, order, batches, outcome)
                for _ in range(RACING_CONNECTIONS)
            ))  # fmt: skip

        assert outcome.empties == []  # every pop found a message
        delivered_ids = [row["id"] for _, row in outcome.delivered]
        assert sorted(delivered_ids) == sorted(outcome.stored)  # none twice, none lost
        assert all(row["receiver_id"] in (None, reader) for reader, row in outcome.delivered)
        assert await message_count(pool) == 0
    finally:
        await pool.close()


async def test_an_exchange_stores_its_sends_before_it_takes_its_pops(
    repo: repository.Repository, pool: asyncpg.Pool, writer: models.ClientInfo,
    queue: models.Queue,
) -> None:  # fmt: skip
    outcome = await repo.exchange([
        repository.PopRequest(writer.id, queue.id),
        Send(writer.id, [queue.id], b"sent in the same call"),
        Send(writer.id, [404_404], b"to a missing queue"),
        repository.PopRequest(writer.id, queue.id),
    ])  # fmt: skip
    first, sent, lost_send, second = outcome.answers
    assert isinstance(sent, list) and len(sent) == 1
    assert isinstance(first, models.Message) and first.id == sent[0]
    assert isinstance(lost_send, errors.QueueNotFound)
    assert isinstance(second, errors.QueueEmpty)
    assert await message_count(pool) == 0


async def test_one_exchange_serves_the_pops_of_several_queues_and_orders(
    batched: CountingRepository, writer: models.ClientInfo, queue: models.Queue
) -> None:
    other = await batched.create_queue("other")
    for target in (queue, other):
        await batched.send(writer.id, [target.id], f"for {target.name}".encode())
    popped = await asyncio.gather(
        batched.read(writer.id, queue_id=queue.id, pop=True),
        batched.read(writer.id, queue_id=other.id, pop=True),
        batched.send(writer.id, [queue.id], b"third"),
        batched.read(writer.id, queue_id=other.id, pop=True),
        batched.read(writer.id, queue_id=queue.id, order=models.Order.PRIORITY, pop=True),
        return_exceptions=True,
    )
    # The send is stored first; then each queue's pops, in the order of their first pop.
    assert [getattr(answer, "body", None) for answer in popped] == [
        b"for jobs", b"for other", None, None, b"third"
    ]  # fmt: skip
    assert isinstance(popped[2], list) and isinstance(popped[3], errors.QueueEmpty)
    assert batched.batches == [5]  # submitted together: one call


async def test_peeks_and_pops_by_sender_ride_the_batch_too(
    batched: CountingRepository, writer: models.ClientInfo, queue: models.Queue
) -> None:
    reader = await batched.register_client("reader")
    await batched.send(writer.id, [queue.id], b"for anyone")
    await batched.send(writer.id, [queue.id], b"for the reader", receiver=reader.id)
    await batched.send(reader.id, [queue.id], b"from the reader")
    answers = await asyncio.gather(
        batched.read(reader.id, queue_id=queue.id),  # a peek
        batched.read(reader.id, sender_id=writer.id, order=models.Order.PRIORITY),
        batched.read(writer.id, queue_id=queue.id, sender_id=reader.id, pop=True),
        batched.read(writer.id, queue_id=999_999),  # a peek at a missing queue
        batched.read(reader.id, sender_id=reader.id, pop=True),  # already taken above
        return_exceptions=True,
    )
    assert [getattr(answer, "body", None) for answer in answers[:3]] == [
        b"for anyone", b"for anyone", b"from the reader"
    ]  # fmt: skip
    assert isinstance(answers[3], errors.QueueNotFound)
    assert isinstance(answers[4], errors.NoMessage)
    # The read of the missing queue failed alone: one call answered all five.
    assert batched.batches == [5]
    assert (await batched.read(reader.id, queue_id=queue.id)).body == b"for anyone"
    with pytest.raises(errors.BadRequest):
        await batched.read(reader.id)  # neither a queue nor a sender


async def test_leased_pops_and_acks_ride_the_batch_and_fail_alone(
    batched: CountingRepository, writer: models.ClientInfo, queue: models.Queue
) -> None:
    instance = (await batched.register_instance("127.0.0.1:1")).id
    reader = await batched.register_client("leaser")
    for body in (b"a", b"b", b"c"):
        await batched.send(writer.id, [queue.id], body)
    lease = repository.Lease(30_000, instance)
    taken = await asyncio.gather(
        *(batched.read(reader.id, queue_id=queue.id, pop=True, lease=lease) for _ in range(3))
    )
    assert sorted(m.body for m in taken) == [b"a", b"b", b"c"]
    assert all(m.delivery is not None and m.deliveries == 1 for m in taken)
    batched.exchanges.clear()

    deliveries = [m.delivery for m in taken if m.delivery is not None]
    acks = await asyncio.gather(
        batched.ack(reader.id, deliveries[0]),
        batched.ack(writer.id, deliveries[1]),  # not the holder
        batched.ack(reader.id, deliveries[1]),
        batched.ack(reader.id, deliveries[0]),  # twice in one batch
        batched.ack(reader.id, deliveries[2]),
        return_exceptions=True,
    )
    assert [type(answer).__name__ for answer in acks] == [
        "NoneType", "LeaseExpired", "NoneType", "LeaseExpired", "NoneType"
    ]  # fmt: skip
    assert batched.batches == [5]  # one call answered all five, each on its own


async def test_a_call_takes_no_more_leased_pops_than_its_subtransaction_budget(
    batched: CountingRepository, writer: models.ClientInfo, queue: models.Queue
) -> None:
    instance = (await batched.register_instance("127.0.0.1:1")).id
    reader = await batched.register_client("leaser")
    count = 2 * batching.SUBTRANSACTIONS_PER_CALL + 10
    await batched.send_many(writer.id, [queue.id], [models.Draft(b"m") for _ in range(count)])
    lease = repository.Lease(30_000, instance)
    batched.exchanges.clear()
    taken = await asyncio.gather(
        *(batched.read(reader.id, queue_id=queue.id, pop=True, lease=lease) for _ in range(count))
    )
    assert len({m.id for m in taken}) == count  # each message leased once
    assert max(batched.batches) <= batching.SUBTRANSACTIONS_PER_CALL
    assert sum(batched.batches) >= count - 1  # all batched, but for a first one alone


async def test_plain_pops_share_one_call_beyond_the_subtransaction_budget(
    batched: CountingRepository, writer: models.ClientInfo, queue: models.Queue
) -> None:
    count = 2 * batching.SUBTRANSACTIONS_PER_CALL
    await batched.send_many(writer.id, [queue.id], [models.Draft(b"m") for _ in range(count)])
    batched.exchanges.clear()
    taken = await asyncio.gather(
        *(batched.read(writer.id, queue_id=queue.id, pop=True) for _ in range(count))
    )
    assert len({m.id for m in taken}) == count
    assert max(batched.batches) > batching.SUBTRANSACTIONS_PER_CALL  # set-based: no budget


async def test_sends_with_options_ride_the_batch_and_fail_alone(
    batched: CountingRepository, writer: models.ClientInfo, reader: models.ClientInfo,
    queue: models.Queue,
) -> None:  # fmt: skip
    def options(**given: Any) -> repository.SendOptions:
        return repository.SendOptions(**given)

    answers = await asyncio.gather(
        batched.send(writer.id, [queue.id], b"plain"),
        batched.send(writer.id, [queue.id], b"once", options=options(dedup_id="k")),
        batched.send(writer.id, [queue.id], b"later", options=options(delay_ms=60_000)),
        batched.send(writer.id, [queue.id, 999_999], b"lost", options=options(ttl_ms=5_000)),
        batched.send(writer.id, [queue.id], b"once again", options=options(dedup_id="k")),
        batched.send(writer.id, [queue.id], b"bad", options=options(delay_ms=-1)),
        return_exceptions=True,
    )
    assert batched.batches == [6]  # one call answered all six, each on its own
    plain, once, later, lost, once_again, bad = answers
    assert isinstance(lost, errors.QueueNotFound)
    assert isinstance(bad, errors.BadRequest)
    assert once_again == once  # the retry stored nothing and got the first ids
    assert isinstance(plain, list) and isinstance(later, list)
    # The bad sends stored nothing; the delayed one waits out of sight.
    taken = [await batched.read(reader.id, queue_id=queue.id, pop=True) for _ in range(2)]
    assert sorted(m.body for m in taken) == [b"once", b"plain"]
    with pytest.raises(errors.QueueEmpty):
        await batched.read(reader.id, queue_id=queue.id, pop=True)
    held = await batched.pool.fetchval("SELECT count(*) FROM courier_held_messages")
    assert held == 1


async def test_batches_sharing_dedup_ids_in_any_order_never_deadlock(
    dsn: str, pool: asyncpg.Pool, writer: models.ClientInfo, queue: models.Queue
) -> None:
    """Each batch locks the dedup rows of its sends; taken in opposite orders by two
    batches at once they would wait on each other, unless the order is fixed."""
    keys = [f"key-{n:03}" for n in range(60)]
    pools = [await asyncpg.create_pool(dsn, min_size=1, max_size=1) for _ in range(2)]
    try:
        repos = [repository.Repository(opened) for opened in pools]

        def batch(order: list[str]) -> list[repository.Operation]:
            once = repository.SendOptions
            return [Send(writer.id, [queue.id], key.encode(), options=once(dedup_id=key))
                    for key in order]  # fmt: skip

        for _ in range(3):
            keys = [f"{key}+" for key in keys]  # fresh ids each round
            forward, backward = await asyncio.gather(
                repos[0].exchange(batch(keys)), repos[1].exchange(batch(keys[::-1]))
            )
            # Both stored or found every id, and agree on each.
            assert forward.answers == backward.answers[::-1]
            assert all(isinstance(ids, list) and len(ids) == 1 for ids in forward.answers)
    finally:
        for opened in pools:
            await opened.close()
    assert await message_count(pool) == 3 * len(keys)


# -- the connection the batcher of single requests keeps -----------------------------


def lent(pool: asyncpg.Pool) -> int:
    """Connections the pool has lent out and not had back."""
    return pool.get_size() - pool.get_idle_size()


async def until_nothing_is_lent(pool: asyncpg.Pool) -> None:
    deadline = time.monotonic() + 10
    while lent(pool):
        assert time.monotonic() < deadline, f"{lent(pool)} connections still lent"
        await asyncio.sleep(0.01)


async def test_the_single_batcher_keeps_one_connection_between_calls(
    batched: CountingRepository, writer: models.ClientInfo, reader: models.ClientInfo,
    queue: models.Queue,
) -> None:  # fmt: skip
    pool = batched.pool
    assert lent(pool) == 0
    for body in (b"a", b"b", b"c"):
        await batched.send(writer.id, [queue.id], body)
        assert lent(pool) == 1  # the same one, kept: never a second
    assert (await batched.read(reader.id, queue_id=queue.id, pop=True)).body == b"a"
    await batched.release_connection()
    assert lent(pool) == 0


async def test_a_kept_connection_goes_back_to_the_pool_every_so_many_calls(
    batched: CountingRepository, writer: models.ClientInfo, queue: models.Queue,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setattr(repository, "KEEP_CALLS", 1)
    await batched.send(writer.id, [queue.id], b"first takes it")
    assert lent(batched.pool) == 1
    await batched.send(writer.id, [queue.id], b"second serves once more, then hands it back")
    assert lent(batched.pool) == 0
    await batched.send(writer.id, [queue.id], b"third takes one again")
    assert lent(batched.pool) == 1


async def test_a_kept_connection_the_database_dropped_is_replaced(
    batched: CountingRepository, pool: asyncpg.Pool, writer: models.ClientInfo,
    reader: models.ClientInfo, queue: models.Queue,
) -> None:  # fmt: skip
    await batched.send(writer.id, [queue.id], b"before")
    async with pool.acquire() as other:
        dropped = await other.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    assert dropped >= 1
    await until_nothing_is_lent(pool)  # the pool took the broken one back by itself
    await batched.send(writer.id, [queue.id], b"after")
    bodies = [(await batched.read(reader.id, queue_id=queue.id, pop=True)).body for _ in "ab"]
    assert bodies == [b"before", b"after"]


async def test_a_pool_of_one_connection_is_not_kept_from_the_other_calls(
    dsn: str, writer: models.ClientInfo, queue: models.Queue
) -> None:
    single = await asyncpg.create_pool(dsn, min_size=1, max_size=1)
    batched = batching.BatchedRepository(single, timeouts=config.PoolSettings(acquire_timeout=2))
    try:
        await batched.send(writer.id, [queue.id], b"batched")
        assert lent(single) == 0
        # A call outside the batcher finds the pool's only connection free.
        assert (await batched.get_queue(queue.id)).message_count == 1
    finally:
        await single.close()


async def test_a_failed_call_hands_the_kept_connection_back(
    batched: CountingRepository, writer: models.ClientInfo, queue: models.Queue
) -> None:
    await batched.send(writer.id, [queue.id], b"kept")
    assert lent(batched.pool) == 1
    with pytest.raises(errors.QueueNotFound):
        await batched.send(writer.id, [999_999], b"to a missing queue")
    assert lent(batched.pool) == 0
    await batched.send(writer.id, [queue.id], b"kept again")
    assert lent(batched.pool) == 1


async def test_closing_while_a_call_runs_lets_it_finish_and_keeps_nothing(
    dsn: str, pool: asyncpg.Pool, writer: models.ClientInfo, queue: models.Queue
) -> None:
    own = await asyncpg.create_pool(dsn, min_size=1, max_size=4)
    batched = batching.BatchedRepository(own)
    await batched.send(writer.id, [queue.id], b"first")
    async with pool.acquire() as blocker, blocker.transaction():
        # A send locks its queue in key-share mode: this holds it back until commit.
        await blocker.execute("SELECT 1 FROM courier_queues WHERE id = $1 FOR UPDATE", queue.id)
        sending = asyncio.create_task(batched.send(writer.id, [queue.id], b"in flight"))
        await until_a_backend_waits_for_a_lock(pool)
        closing = asyncio.create_task(batched.close())
        await asyncio.sleep(0.2)
        assert not sending.done() and not closing.done()
    # The send ends, its connection goes back rather than being kept, and the pool
    # closes as soon as it has it: long before close_pool's five seconds run out.
    async with asyncio.timeout(3):
        assert len(await sending) == 1
        await closing
    assert own.is_closing()
    bodies = [
        (await pool.fetchval("SELECT body FROM courier_messages ORDER BY id LIMIT 1 OFFSET $1", n))
        for n in (0, 1)
    ]
    assert [bytes(body) for body in bodies] == [b"first", b"in flight"]


async def test_a_send_batch_looks_its_senders_up_by_key_however_many_clients_exist(
    repo: repository.Repository, pool: asyncpg.Pool
) -> None:
    """With a couple of thousand clients, a join of the batch with the client table
    had a generic plan that read the whole table on every batch. Each sender is now
    found by key: the batch's own transaction counts no scan of the client table."""
    await pool.execute(
        "INSERT INTO courier_clients (name, mode)"
        " SELECT 'many' || n, 'read_write' FROM generate_series(1, 2000) n"
    )
    await pool.execute("ANALYZE courier_clients")
    writer = await repo.register_client("writer")
    queue = (await repo.create_queue("jobs")).id
    async with pool.acquire() as connection, connection.transaction():
        await connection.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        for _ in range(7):  # past PL/pgSQL's first five custom plans, onto the generic one
            rows = await connection.fetch(
                "SELECT * FROM courier_send_batch_v3($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                [writer.id] * 3, [b"a", b"b", b"c"], [None] * 3, [5] * 3, [None] * 3,
                [True] * 3, [1, 2, 3], [queue] * 3, 1_000_000,
            )  # fmt: skip
            assert [row["status"] for row in rows] == [0, 0, 0]
        scans = await connection.fetchval(
            "SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relname = 'courier_clients'"
        )
    assert scans == 0
