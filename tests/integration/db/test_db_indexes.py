"""Every read mode is served by an index, never a sequential scan of the messages.

Method: the functions' queries are static statements inside PL/pgSQL, so EXPLAINing
hand-copied query text could drift from what really runs. Instead the session loads
auto_explain with ``log_nested_statements`` and ``log_level = notice``: PostgreSQL
then sends the plan of every statement the stored function executes, with its real
parameters, to this client as a notice (JSON). Each mode is run more than five times
so that PL/pgSQL's switch from custom to cached generic plans is covered as well, and
by the last run every read must be on its cached generic plan: a statement the
planner keeps re-planning (say, one with a LIMIT taken from a variable) costs a
planning pass on every call.

The table holds about a million messages (generated in SQL) over 100 queues and 1000
senders, half addressed to a receiver, a quarter non-persistent (in the unlogged
partition), so the planner has a real choice to make in both partitions.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

pytestmark = pytest.mark.slow

MESSAGES = 1_000_000
QUEUES = 100
CLIENTS = 1000
RUNS_PER_MODE = 6  # PL/pgSQL may switch to a generic plan after five executions

FILL = f"""
INSERT INTO courier_clients (name, mode)
SELECT 'client' || n, 'read_write' FROM generate_series(1, {CLIENTS}) n;
INSERT INTO courier_queues (name) SELECT 'queue' || n FROM generate_series(1, {QUEUES}) n;
INSERT INTO courier_messages
    (queue_id, sender_id, receiver_id, context, priority, created_at, body, persistent)
SELECT 1 + n % {QUEUES},
       1 + (n / 7) % {CLIENTS},
       CASE WHEN n % 2 = 0 THEN 1 + n % {CLIENTS} END,
       CASE WHEN n % 5 = 0 THEN n % 1000 END,
       1 + n % 10,
       timestamptz '2024-01-01' + n * interval '1 millisecond',
       convert_to('body ' || n, 'UTF8'),
       n % 4 <> 0
FROM generate_series(1, {MESSAGES}) n;
"""

SECONDARY_INDEXES = """
SELECT indexname, replace(indexdef, ' ON ONLY ', ' ON ') AS indexdef FROM pg_indexes
WHERE tablename = 'courier_messages' AND indexname <> 'courier_messages_pkey'
"""
"""The indexes of the partitioned table, each defined again on every partition too."""

PARTITION_INDEXES = """
SELECT c.relname AS partition_index, p.relname AS index
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
WHERE p.relkind = 'I'
"""
"""Each partition's index, and the index of courier_messages it belongs to."""


@pytest.fixture
async def filled(dsn: str) -> AsyncIterator[asyncpg.Connection]:
    connection = await asyncpg.connect(dsn)
    try:
        async with connection.transaction():
            # Bulk load without the notify trigger and per-row checks, then build the
            # schema's own secondary indexes in one pass each: seconds instead of a minute.
            await connection.execute("SET LOCAL session_replication_role = replica")
            await connection.execute("SET LOCAL maintenance_work_mem = '256MB'")
            definitions = await connection.fetch(SECONDARY_INDEXES)
            for row in definitions:
                await connection.execute(f"DROP INDEX {row['indexname']}")
            await connection.execute(FILL)
            for row in definitions:
                await connection.execute(row["indexdef"])
        await connection.execute("VACUUM ANALYZE")
        yield connection
    finally:
        await connection.close()


async def explain_every_statement(connection: asyncpg.Connection) -> None:
    """Have auto_explain send this session the plan of every statement, nested too."""
    await connection.execute("LOAD 'auto_explain'")
    for setting, value in [
        ("log_min_duration", "0"),
        ("log_nested_statements", "on"),
        ("log_format", "json"),
        ("log_level", "notice"),
    ]:
        await connection.execute(f"SET auto_explain.{setting} = '{value}'")


async def plans_of(connection: asyncpg.Connection, call: str, *args: Any) -> list[dict[str, Any]]:
    """The plans of every statement run by `call`, as auto_explain reports them."""
    plans: list[dict[str, Any]] = []

    def on_notice(_: object, message: asyncpg.PostgresLogMessage) -> None:
        text = message.message
        if text.startswith("duration:") and "{" in text:
            plans.append(json.loads(text[text.index("{") :])["Plan"])

    connection.add_log_listener(on_notice)
    try:
        async with connection.transaction():
            await connection.fetch(call, *args)
            raise _Rollback  # keep the data set unchanged for the next mode
    except _Rollback:
        pass
    finally:
        connection.remove_log_listener(on_notice)
    return plans


class _Rollback(Exception):
    pass


def scans_of_messages(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """Every scan node of courier_messages (or of one of its partitions) in the plan tree."""
    found = []
    on_messages = (plan.get("Relation Name") or "").startswith("courier_messages")
    index = plan.get("Index Name")
    if (on_messages and plan["Node Type"].endswith("Scan")) or (index or "").startswith(
        "courier_messages"
    ):
        found.append(plan)
    for child in plan.get("Plans", []):
        found += scans_of_messages(child)
    return found


def is_generic(scan: dict[str, Any]) -> bool:
    """A generic plan compares with parameters ($n); a custom one with literals."""
    condition = scan.get("Index Cond") or scan.get("Recheck Cond") or ""
    return "$" in condition and "'" not in condition


INDEX_SCANS = {"Index Scan", "Index Only Scan", "Bitmap Heap Scan", "Bitmap Index Scan"}
WALKS = {"Index Scan", "Index Only Scan"}
WALKED_TO_A_LIMIT = {"queues_for_me"}
"""Modes whose scans must walk an index: a bitmap scan reads every matching entry before
the statement's LIMIT (queues_for_me reads at most 1,000 of the reader's messages)."""
READ = "SELECT * FROM courier_read_v3($1, $2, $3, $4, $5, 0, NULL)"
# mode -> (call, arguments, the index that must serve it)
MODES: dict[str, tuple[str, tuple[object, ...], str]] = {
    f"{selector} {order} {'pop' if pop else 'peek'}": (
        READ,
        (7, queue, sender, order, pop),
        f"courier_messages_{selector}_{order}",
    )
    for selector, queue, sender in [
        ("queue", 42, None),
        ("sender", None, 420),
        ("queue_sender", 21, 420),
    ]
    for order in ("time", "priority")
    for pop in (False, True)
}
MODES["pop_response"] = (
    "SELECT * FROM courier_pop_response_v3($1, $2, $3)",
    (8, 8, 40),
    "courier_messages_response",
)
MODES["queues_for_me"] = (
    "SELECT * FROM courier_queues_for_me_v2($1, 10000)",
    (7,),
    "courier_messages_queue_time",
)
MODES["get_queue count"] = (
    "SELECT * FROM courier_get_queue_v2($1, NULL, 10000)",
    (42,),
    "courier_messages_queue_time",
)
MODES["queue_sender miss"] = (
    READ,
    (7, 42, 999, "time", True),
    "courier_messages_queue_sender_time",
)

SELECTIVE = "SELECT * FROM courier_read_v4($1, $2, $3, $4, $5, 0, NULL, $6::jsonpath, $7::jsonb)"
MATCH = ('$."k" == $v1', '{"v1": 1}')  # no message has k: the whole audience is walked
# A selective read may take any index of its queue or sender ("": which is the
# planner's choice), but never a sequential scan, generic plans included.
MODES |= {
    f"selector {selector} {order} {'pop' if pop else 'peek'}": (
        SELECTIVE, (7, queue, sender, order, pop, *MATCH), ""
    )
    for selector, queue, sender in [("queue", 42, None), ("sender", None, 420),
                                    ("queue_sender", 21, 420)]
    for order in ("time", "priority")
    for pop in (False, True)
}  # fmt: skip


async def test_every_read_mode_uses_an_index_on_a_million_messages(
    filled: asyncpg.Connection,
) -> None:
    assert await filled.fetchval("SELECT count(*) FROM courier_messages") == MESSAGES
    await explain_every_statement(filled)

    # A scan of a partition names the partition's index; count it as the table's.
    owning = {row["partition_index"]: row["index"] for row in await filled.fetch(PARTITION_INDEXES)}
    for mode, (call, args, index) in MODES.items():
        runs = [
            [
                scan
                for plan in await plans_of(filled, call, *args)
                for scan in scans_of_messages(plan)
            ]
            for _ in range(RUNS_PER_MODE)
        ]
        scans = [
            (scan["Node Type"], owning.get(scan.get("Index Name"), scan.get("Index Name")))
            for run in runs
            for scan in run
        ]
        assert {node_type for node_type, _ in scans} <= INDEX_SCANS, f"{mode}: {scans}"
        assert not index or index in {name for _, name in scans}, f"{mode}: {scans}"
        if mode in WALKED_TO_A_LIMIT:
            assert {node_type for node_type, _ in scans} <= WALKS, f"{mode}: {scans}"
        if call == READ:
            assert runs[-1] and all(map(is_generic, runs[-1])), f"{mode} re-plans: {runs[-1]}"


COUNTED_QUEUES = 5
COUNTS = {
    "queues_for_me": "SELECT message_counts FROM courier_queues_for_me_v2($1, 100)",
    "list_queues": "SELECT message_counts FROM courier_list_queues_v2(100)",
    "topics": "SELECT array_agg(backlog ORDER BY queue_id) FROM courier_topics_v1(NULL, NULL, 100)",
}
"""Each listing that counts every queue's messages, and its counts in queue order."""


async def test_every_queue_is_counted_in_one_statement(dsn: str) -> None:
    # A per-queue function call would run (and plan) one statement per queue.
    connection = await asyncpg.connect(dsn)
    try:
        reader = await connection.fetchval(
            "INSERT INTO courier_clients (name, mode) VALUES ('reader', 'read_write') RETURNING id"
        )
        await connection.execute(
            f"INSERT INTO courier_queues (name) SELECT 'queue' || n "
            f"FROM generate_series(1, {COUNTED_QUEUES}) n"
        )
        await connection.execute(
            "INSERT INTO courier_messages (queue_id, sender_id, priority, body) "
            "SELECT q.id, $1, 5, 'x' FROM courier_queues q",
            reader,
        )
        await connection.execute(
            "INSERT INTO courier_topics (name) VALUES ('news');"
            "INSERT INTO courier_subscriptions (queue_id, topic_id, name, subscriber_id, durable) "
            f"SELECT q.id, t.id, q.name, {reader}, true FROM courier_queues q, courier_topics t"
        )
        await explain_every_statement(connection)
        for name, call in COUNTS.items():
            args = (reader,) if "$1" in call else ()
            plans = await plans_of(connection, call, *args)
            counting = [plan for plan in plans if scans_of_messages(plan)]
            assert len(counting) == 1, f"{name}: {len(counting)} statements read the messages"
            assert await connection.fetchval(call, *args) == [1] * COUNTED_QUEUES, name

        # Past 1,000 messages to read, the reader's listing counts queue by queue: one
        # statement more, still not one per queue.
        await connection.execute(
            "INSERT INTO courier_messages (queue_id, sender_id, priority, body) "
            "SELECT (SELECT min(q.id) FROM courier_queues q), $1, 5, 'x' "
            "FROM generate_series(1, 1000)",
            reader,
        )
        call = COUNTS["queues_for_me"]
        counting = [
            plan for plan in await plans_of(connection, call, reader) if scans_of_messages(plan)
        ]
        assert len(counting) == 2
        assert await connection.fetchval(call, reader) == [100] + [1] * (COUNTED_QUEUES - 1)
    finally:
        await connection.close()
