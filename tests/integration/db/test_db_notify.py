"""The courier_messages channel: one notification per statement, queue and receiver,
with how many messages it stored there, at commit, for the queues a middleware
watches (or every queue while a middleware that does not watch is registered)."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from db_helpers import open_transaction, until_a_backend_waits_for_a_lock

from courier import errors, models
from courier.db import repository

CHANNEL = "courier_messages"
WATCH_S = 60.0
STORE_ONE = """
INSERT INTO courier_messages (queue_id, sender_id, priority, body) VALUES ($1, $2, 5, $3)"""


async def watched(repo: repository.Repository, *names: str) -> list[models.Queue]:
    queues = [await repo.create_queue(name) for name in names]
    for queue in queues:
        await repo.watch_queue(queue.id, WATCH_S)
    return queues


async def collect_notifications(dsn: str, action: object, *, settle: float = 0.2) -> list[str]:
    """Payloads received on the channel while `action` (a coroutine) runs."""
    payloads: list[str] = []
    listener = await asyncpg.connect(dsn)
    try:
        await listener.add_listener(CHANNEL, lambda *args: payloads.append(args[3]))
        await action  # type: ignore[misc]
        await asyncio.sleep(settle)
    finally:
        await listener.close()
    return payloads


async def test_each_copy_notifies_its_queue_and_receiver(
    dsn: str, repo: repository.Repository, writer: models.ClientInfo, reader: models.ClientInfo
) -> None:
    first, second = await watched(repo, "first", "second")

    async def send_some() -> None:
        await repo.send(writer.id, [first.id, second.id], b"fan out", receiver=reader.id)
        await repo.send(writer.id, [second.id], b"for anyone")

    payloads = await collect_notifications(dsn, send_some())

    assert sorted(payloads) == sorted(
        [f"{first.id}:{reader.id}:1", f"{second.id}:{reader.id}:1", f"{second.id}::1"]
    )


async def test_a_batch_notifies_once_per_queue_and_receiver_with_its_count(
    dsn: str, repo: repository.Repository, writer: models.ClientInfo, reader: models.ClientInfo
) -> None:
    first, second = await watched(repo, "first", "second")
    batch = [repository.SendRequest(writer.id, [first.id], b"a") for _ in range(3)]
    batch += [repository.SendRequest(writer.id, [first.id, second.id], b"b", receiver=reader.id)]

    payloads = await collect_notifications(dsn, repo.send_each(batch))

    assert sorted(payloads) == sorted(
        [f"{first.id}::3", f"{first.id}:{reader.id}:1", f"{second.id}:{reader.id}:1"]
    )


async def test_a_refused_send_notifies_nobody(
    dsn: str, repo: repository.Repository, writer: models.ClientInfo, queue: models.Queue
) -> None:
    await repo.watch_queue(queue.id, WATCH_S)

    async def refused() -> None:
        with pytest.raises(errors.QueueNotFound):
            await repo.send(writer.id, [queue.id, 999], b"never stored")

    assert await collect_notifications(dsn, refused()) == []


async def test_only_watched_queues_notify(
    dsn: str, repo: repository.Repository, writer: models.ClientInfo
) -> None:
    (watched_queue,) = await watched(repo, "watched")
    quiet = await repo.create_queue("quiet")
    await repo.register_instance("127.0.0.1:1")  # a middleware that watches

    async def send_to_both() -> None:
        await repo.send(writer.id, [watched_queue.id, quiet.id], b"to both")
        await repo.send(writer.id, [quiet.id], b"to the quiet one")

    assert await collect_notifications(dsn, send_to_both()) == [f"{watched_queue.id}::1"]


async def test_a_middleware_that_does_not_watch_hears_every_queue(
    dsn: str, repo: repository.Repository, pool: asyncpg.Pool, writer: models.ClientInfo,
    queue: models.Queue,
) -> None:  # fmt: skip
    # What a middleware older than migration 0034 registers as.
    await pool.execute("SELECT courier_register_instance_v1('127.0.0.1:1', 30)")
    payloads = await collect_notifications(dsn, repo.send(writer.id, [queue.id], b"heard"))
    assert payloads == [f"{queue.id}::1"]
    await pool.execute("DELETE FROM courier_instances")
    assert await collect_notifications(dsn, repo.send(writer.id, [queue.id], b"unheard")) == []


async def test_a_watch_that_ran_out_notifies_no_more(
    dsn: str, repo: repository.Repository, pool: asyncpg.Pool, writer: models.ClientInfo,
    queue: models.Queue,
) -> None:  # fmt: skip
    await repo.watch_queue(queue.id, WATCH_S)
    await pool.execute("UPDATE courier_queue_watches SET until = now() - interval '1 second'")
    assert await collect_notifications(dsn, repo.send(writer.id, [queue.id], b"x")) == []
    await repo.watch_queue(queue.id, WATCH_S)  # watched again
    assert await collect_notifications(dsn, repo.send(writer.id, [queue.id], b"y")) != []


async def test_a_new_watch_waits_for_sends_in_flight_so_none_falls_between(
    dsn: str, repo: repository.Repository, pool: asyncpg.Pool, writer: models.ClientInfo,
    reader: models.ClientInfo, queue: models.Queue,
) -> None:  # fmt: skip
    # A send that looked for watches before the watch began, and commits after it,
    # notifies nobody: the read after the watch must see its message instead.
    async with open_transaction(dsn, STORE_ONE, queue.id, writer.id, b"late") as commit:
        watching = asyncio.ensure_future(repo.watch_queue(queue.id, WATCH_S, wait_ms=30_000))
        await until_a_backend_waits_for_a_lock(pool)
        assert not watching.done()
        await commit()
        assert await asyncio.wait_for(watching, 5) is True
    message = await repo.read(reader.id, queue_id=queue.id, pop=True)
    assert message.body == b"late"


async def test_a_watch_kept_waiting_too_long_gives_up_and_makes_none(
    dsn: str, repo: repository.Repository, pool: asyncpg.Pool, writer: models.ClientInfo,
    queue: models.Queue,
) -> None:  # fmt: skip
    async with open_transaction(dsn, STORE_ONE, queue.id, writer.id, b"slow"):
        assert await repo.watch_queue(queue.id, WATCH_S, wait_ms=50) is False
    assert await pool.fetchval("SELECT count(*) FROM courier_queue_watches") == 0


async def test_a_send_after_a_new_watch_began_waits_for_it(
    dsn: str, repo: repository.Repository, pool: asyncpg.Pool, writer: models.ClientInfo,
    queue: models.Queue,
) -> None:  # fmt: skip
    # What courier_watch_queue_v1 holds while it makes a new watch.
    lock = "SELECT pg_advisory_xact_lock(1131377779, $1::integer)"
    async with open_transaction(dsn, lock, queue.id) as commit:
        sending = asyncio.ensure_future(repo.send(writer.id, [queue.id], b"held back"))
        await until_a_backend_waits_for_a_lock(pool)
        assert not sending.done()
        await commit()
        await asyncio.wait_for(sending, 5)


async def test_a_watch_with_long_to_run_is_renewed_without_waiting(
    dsn: str, repo: repository.Repository, pool: asyncpg.Pool, writer: models.ClientInfo,
    queue: models.Queue,
) -> None:  # fmt: skip
    await repo.watch_queue(queue.id, WATCH_S)
    before = await pool.fetchval("SELECT until FROM courier_queue_watches")
    async with open_transaction(dsn, STORE_ONE, queue.id, writer.id, b"x"):
        # The send holds the queue's watch lock; an extension does not wait for it.
        extending = repo.watch_queue(queue.id, 2 * WATCH_S, wait_ms=60_000)
        assert await asyncio.wait_for(extending, 5) is True
    assert await pool.fetchval("SELECT until FROM courier_queue_watches") > before


async def test_watches_of_missing_queues_and_bad_lengths(
    repo: repository.Repository, pool: asyncpg.Pool
) -> None:
    assert await repo.watch_queue(987_654, WATCH_S) is True
    assert await pool.fetchval("SELECT count(*) FROM courier_queue_watches") == 0
    for seconds, wait_ms in ((0.0, 200), (10.0, 200), (3601.0, 200), (60.0, 0), (60.0, 60_001)):
        with pytest.raises(errors.BadRequest):
            await repo.watch_queue(987_654, seconds, wait_ms=wait_ms)


async def test_watches_that_ran_out_long_ago_are_dropped(
    repo: repository.Repository, pool: asyncpg.Pool, queue: models.Queue
) -> None:
    await pool.execute(
        "INSERT INTO courier_queue_watches SELECT g, now() - interval '2 hours'"
        " FROM generate_series(1000001, 1000020) g"
    )
    await repo.watch_queue(queue.id, WATCH_S)
    # A few at a time: a watch's call stays short however many there are.
    assert await pool.fetchval("SELECT count(*) FROM courier_queue_watches") == 1 + 20 - 16
