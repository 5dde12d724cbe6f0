"""The `standard` behaviour against its definition (docs/lab.md), on a real system."""

from __future__ import annotations

import random

import asyncpg

from courier.client import AsyncClient, CallRecord
from courier.lab import workloads
from courier.server import launcher

THE_CYCLE = [
    ("send", "OK"),  # 1 to anyone on queue 1
    ("peek", "OK"),  # 2 peek queue 1
    ("pop", "OK"),  # 3 pop queue 1
    ("send", "OK"),  # 4 to myself on queue 1
    ("peek", "OK"),  # 5 peek by sender=me on queue 1
    ("pop", "OK"),  # 6 pop by sender=me on queue 1
    ("create_queue", "OK"),  # 7
    ("send", "OK"),  # 8 to the new queue
    ("queues_for_me", "OK"),  # 9
    ("peek", "OK"),  # 10 peek by sender=me, any queue
    ("pop", "OK"),  # 11 pop from the new queue
    ("delete_queue", "OK"),  # 12
]


async def prepare(address: str) -> tuple[int, int, workloads.QueueIds]:
    """Queue 1 (the shared queue) first, then another client and the standard client."""
    async with AsyncClient(address) as admin:
        await admin.open()
        await admin.login(client_id=(await admin.register("admin")).id)
        shared = await admin.create_queue(workloads.SHARED_QUEUE)
        pairs = await admin.create_queue(workloads.PAIRS_QUEUE)
        jobs = await admin.create_queue(workloads.JOBS_QUEUE)
        other = await admin.register("someone-else")
        me = await admin.register("standard-0")
    return other.id, me.id, workloads.QueueIds((shared.id,), pairs.id, jobs.id)


async def one_cycle(address: str, me: int, queues: workloads.QueueIds) -> list[CallRecord]:
    calls: list[CallRecord] = []
    async with AsyncClient(
        address, recorder=lambda row: calls.append(CallRecord._make(row))
    ) as client:
        await client.open(client_id=me)
        calls.clear()  # keep the cycle's own requests only
        context = workloads.Context(
            client=client, me=me, name="standard-0", queues=queues,
            body=workloads.message_body(200), priorities=workloads.PriorityChoice.parse(7),
            rng=random.Random(1),
        )  # fmt: skip
        await workloads.standard(context)
        return list(calls)  # before the logout of closing


async def messages(dsn: str) -> list[asyncpg.Record]:
    connection = await asyncpg.connect(dsn)
    try:
        return await connection.fetch(
            "SELECT queue_id, sender_id, receiver_id, priority, length(body) AS size"
            " FROM courier_messages ORDER BY id"
        )
    finally:
        await connection.close()


async def queue_names(dsn: str) -> list[str]:
    connection = await asyncpg.connect(dsn)
    try:
        return [row["name"] for row in await connection.fetch("SELECT name FROM courier_queues")]
    finally:
        await connection.close()


async def test_queue_one_is_the_shared_queue_created_first(
    middleware: launcher.Middleware,
) -> None:
    _, _, queues = await prepare(middleware.address)
    assert queues.shared == 1


async def test_one_cycle_makes_the_twelve_requests_and_leaves_the_database_as_it_was(
    dsn: str, middleware: launcher.Middleware
) -> None:
    _, me, queues = await prepare(middleware.address)
    before = sorted(await queue_names(dsn))
    calls = await one_cycle(middleware.address, me, queues)
    assert [(call.operation, call.status) for call in calls] == THE_CYCLE
    assert {call.client_id for call in calls} == {me}
    # Everything it sent it took back, and the queue it made is gone again.
    assert await messages(dsn) == []
    assert sorted(await queue_names(dsn)) == before


async def test_with_an_older_message_in_queue_one_the_cycle_takes_that_one_instead(
    dsn: str, middleware: launcher.Middleware
) -> None:
    other, me, queues = await prepare(middleware.address)
    async with AsyncClient(middleware.address) as someone:
        await someone.open(client_id=other)
        await someone.send(queues.shared, "older", priority=3)
    await one_cycle(middleware.address, me, queues)
    # Steps 2-3 take the oldest visible message: the other client's. Steps 5-6 (by
    # sender = me) then take the message of step 1, so the one of step 4, addressed
    # to myself, stays behind with the cycle's priority.
    (left,) = await messages(dsn)
    assert (left["queue_id"], left["sender_id"], left["receiver_id"]) == (queues.shared, me, me)
    assert (left["priority"], left["size"]) == (7, 200)
