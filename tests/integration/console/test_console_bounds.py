"""Bounded cost: every list query is a LIMITed index walk, filtered pages stop at
their scan budget, counts stop at the cap, and the rate counters are exact."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg

from courier.console import queries, state
from courier.db import repository
from helpers.consoles import StartConsole

SQL_DIR = Path(queries.__file__).parent / "sql"
PAGE = 11  # rows fetched for a page of 10
CAP = 100
SCAN = 500
# query: (parameters, the most rows of courier_messages it may read, returned or
# filtered out). A page reads its index walk plus one row per message shown.
BOUNDED_QUERIES: dict[str, list[tuple[tuple[Any, ...], int]]] = {
    "overview_counts": [((CAP,), CAP + 1)],
    "clients": [
        (("", 0, PAGE, CAP), PAGE * 2 * (CAP + 1)),
        (("client-1", 0, PAGE, CAP), PAGE * 2 * (CAP + 1)),
    ],
    "client": [((1, CAP), 2 * (CAP + 1)), ((2, CAP), 2 * (CAP + 1))],
    "messages_sent_by": [((1, 0, PAGE, 120), 2 * PAGE), ((7, 0, PAGE, 120), 2 * PAGE)],
    "messages_waiting_for": [((2, 0, PAGE, 120), 2 * PAGE), ((8, 0, PAGE, 120), 2 * PAGE)],
    "queues": [(("", 0, PAGE, CAP), PAGE * (CAP + 2))],
    "queue": [((1, CAP), CAP + 2), ((5, CAP), CAP + 2)],
    "queue_messages": [((1, 0, PAGE, 120), 2 * PAGE), ((5, 0, PAGE, 120), 2 * PAGE)],
    "queue_messages_filtered": [
        ((1, 0, PAGE, 120, 999, None, None, SCAN), SCAN + PAGE),  # matches nothing
        ((1, 0, PAGE, 120, None, 0, 7, SCAN), SCAN + PAGE),
        ((5, 0, PAGE, 120, 1, None, None, SCAN), SCAN + PAGE),
    ],
    "queue_scan_window": [((1, 0, SCAN), SCAN)],
    "message": [((5,), 1), ((30_002,), 0)],  # visible, held
    "dead_letter_sources": [((2,), 0)],
    "live_instances": [((), 0)],
    "message_counters": [((), 0)],
    # Each of the page's topics has at most 3 subscriptions, each backlog counted to the cap.
    "topics": [((0, PAGE, CAP), PAGE * 3 * (CAP + 1))],
    # The cluster page reads no messages but each member's length, counted to the cap.
    "cluster_nodes": [(("postgresql://127.0.0.1/courier",), 0)],
    "replicated_members": [((0, PAGE), 0)],
    "member_lengths": [(([1, 5, 999], CAP), 2 * (CAP + 1))],
    "member_totals": [((), 0)],
    "cluster_decisions": [((50,), 0)],
}

# 30,000 messages, skewed like a busy system: queue 1 holds two thirds of them,
# client 1 sent half, client 2 is the receiver of a quarter; the rest is spread thin.
# Every tenth body is binary, queue 2 is queue 1's dead-letter queue, and 1,000 more
# messages are held (leased or delayed). 20 topics share 50 subscriptions, one per queue.
BULK_MESSAGES = 30_000
BULK_LOAD = f"""
INSERT INTO courier_clients (name, mode)
    SELECT 'client-' || n, 'read_write' FROM generate_series(1, 200) AS n;
INSERT INTO courier_queues (name) SELECT 'queue-' || n FROM generate_series(1, 50) AS n;
UPDATE courier_queues SET max_deliveries = 3, dead_letter_queue_id = 2 WHERE id = 1;
INSERT INTO courier_messages (queue_id, sender_id, receiver_id, priority, body)
    SELECT CASE WHEN n % 3 <> 0 THEN 1 ELSE 2 + n % 49 END,
           CASE WHEN n % 2 = 0 THEN 1 ELSE 2 + n % 199 END,
           CASE n % 4 WHEN 0 THEN 2 WHEN 1 THEN 3 + n % 197 END,
           1 + n % 10,
           CASE WHEN n % 10 = 0 THEN '\\x00ff'::bytea ELSE convert_to('body ' || n, 'UTF8') END
    FROM generate_series(1, {BULK_MESSAGES}) AS n;
INSERT INTO courier_held_messages (id, queue_id, sender_id, priority, created_at, body,
                                   deliveries, visible_at, delivery_id, holder_id)
    SELECT {BULK_MESSAGES} + n, 1 + n % 5, 1, 5, now(), convert_to('held ' || n, 'UTF8'),
           n % 2, now() + interval '1 hour', CASE WHEN n % 2 = 1 THEN n END,
           CASE WHEN n % 2 = 1 THEN 1 END
    FROM generate_series(1, 1000) AS n;
INSERT INTO courier_topics (name) SELECT 'topic-' || n FROM generate_series(1, 20) AS n;
INSERT INTO courier_subscriptions (queue_id, topic_id, name, subscriber_id, durable)
    SELECT n, 1 + n % 20, 'sub-' || n, 1, true FROM generate_series(1, 50) AS n;
ANALYZE;
"""


def plan_nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from plan_nodes(child)


def messages_examined(plan: dict[str, Any]) -> tuple[int, set[str]]:
    """Rows of courier_messages the plan read (returned or filtered out), and how."""
    examined, scans = 0, set()
    for node in plan_nodes(plan):
        index = node.get("Index Name") or ""
        if node.get("Relation Name") == "courier_messages" or index.startswith("courier_messages"):
            loops = node.get("Actual Loops", 1)
            read = node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)
            examined += int(read * loops)
            scans.add(node["Node Type"])
    return examined, scans


async def bulk_load(pool: asyncpg.Pool) -> None:
    """Test data written straight into the tables."""
    async with pool.acquire() as connection:
        await connection.execute(BULK_LOAD)


async def test_every_console_query_examines_a_bounded_number_of_messages(
    pool: asyncpg.Pool,
) -> None:
    await bulk_load(pool)
    # Every query is here; _*.sql are the parts the queries include.
    assert set(BOUNDED_QUERIES) == {path.stem for path in SQL_DIR.glob("[!_]*.sql")}
    async with pool.acquire() as connection:
        for setting, value in state.SESSION_SETTINGS.items():
            await connection.execute(f"SET {setting} = '{value}'")
        for name, cases in BOUNDED_QUERIES.items():
            statement = await connection.prepare(
                "EXPLAIN (ANALYZE, FORMAT JSON) " + queries.sql(name)
            )
            for args, bound in cases:
                plan = json.loads(await statement.fetchval(*args))[0]["Plan"]
                examined, scans = messages_examined(plan)
                assert examined <= bound, (name, args, examined, bound)
                if name != "overview_counts":  # a LIMITed sample of the table, by design
                    assert "Seq Scan" not in scans, (name, args)


async def test_overview_counts_stop_at_the_cap(pool: asyncpg.Pool) -> None:
    await bulk_load(pool)
    exact = await queries.counts(pool, count_cap=BULK_MESSAGES)
    assert (exact.messages_total, exact.messages_exact) == (BULK_MESSAGES, True)
    capped = await queries.counts(pool, count_cap=100)
    assert capped.messages_exact is False
    assert 0.5 * BULK_MESSAGES < capped.messages_total < 1.5 * BULK_MESSAGES  # the estimate


async def test_per_row_counts_stop_at_the_cap(
    start_console: StartConsole, repo: repository.Repository
) -> None:
    console = await start_console(count_cap=5)
    client = await repo.register_client("alice")
    queue = await repo.create_queue("jobs")
    for n in range(8):
        await repo.send(client.id, [queue.id], b"m%d" % n, receiver=client.id)
    row = (await console.get_json("/api/queues"))["queues"]["items"][0]
    assert (row["messages"], row["name"]) == (6, "jobs")  # cap + 1 means "more than 5"
    me = (await console.get_json("/api/clients"))["clients"]["items"][0]
    assert (me["sent"], me["waiting"]) == (6, 6)
    page = await console.http.get("/queues")
    assert "5+" in page.text
    overview = await console.get_json("/api/overview")
    assert overview["counts"]["messages_exact"] is False


async def test_filtered_pages_stop_at_the_scan_budget(
    start_console: StartConsole, repo: repository.Repository
) -> None:
    console = await start_console(scan_limit=5)
    alice = await repo.register_client("alice")
    bob = await repo.register_client("bob")
    queue = await repo.create_queue("jobs")
    ids = []
    for position in range(1, 13):
        sender = bob if position in (3, 8, 12) else alice
        ids += await repo.send(sender.id, [queue.id], b"message %d" % position)
    pages = []
    cursor = 0
    while cursor is not None:
        body = await console.get_json(
            f"/api/queues/{queue.id}/messages", sender=bob.id, after=cursor
        )
        page = body["messages"]
        pages.append(([m["id"] for m in page["items"]], page["next_after"], page["scan_limited"]))
        cursor = page["next_after"]
    assert pages == [
        ([ids[2]], ids[4], True),
        ([ids[7]], ids[9], True),
        ([ids[11]], None, False),
    ]


async def test_rates_count_every_message_stored_and_removed(
    start_console: StartConsole, dsn: str
) -> None:
    console = await start_console()
    await wait_for(console, lambda rates: len(rates["points"]) >= 1)  # a baseline exists
    repo = await repository.Repository.connect(dsn)
    try:
        client = await repo.register_client("alice")
        jobs = await repo.create_queue("jobs")
        more = await repo.create_queue("more")
        for n in range(25):
            await repo.send(client.id, [jobs.id], b"job %d" % n)
        for n in range(5):
            await repo.send(client.id, [jobs.id, more.id], b"both %d" % n)
        for _ in range(12):
            await repo.read(client.id, queue_id=jobs.id, pop=True)
    finally:
        await repo.close()  # closing flushes the backends' table statistics
    rates = await wait_for(
        console, lambda rates: (rates["sent_in_window"], rates["popped_in_window"]) == (35, 12)
    )
    assert max(point["sent"] for point in rates["points"]) > 0
    overview = await console.get_json("/api/overview")
    assert overview["counts"]["messages_total"] == 35 - 12


async def wait_for(console: Any, condition: Any, timeout: float = 20.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        rates = await console.get_json("/api/rates")
        if condition(rates):
            return rates
        assert time.monotonic() < deadline, rates
        await asyncio.sleep(0.2)
