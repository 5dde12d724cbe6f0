"""The console's reads: each one runs one .sql file from console/sql and returns rows.

Every list is a keyset page (``id > after ORDER BY id LIMIT n``) over an index, and
every per-row count stops at the count cap, so the cost of a page is bounded no
matter how many messages are stored. What a client, queue or message row holds is
written once, in console/sql/_*.sql, which the queries include.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.resources
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import asyncpg

from courier import config, errors, models
from courier.console import bodies, params, rows
from courier.db import jsonb

T = TypeVar("T")
PREVIEW_BYTES = 120
INCLUDE = re.compile(r"^-- include: (?P<name>_\w+)\.sql$", re.MULTILINE)
# A message row's fields that come straight from its record; the body is shown.
MESSAGE_COLUMNS = [
    f.name for f in dataclasses.fields(rows.MessageRow) if f.name not in {"body", "body_binary"}
]


@functools.cache
def sql(name: str) -> str:
    """The text of console/sql/<name>.sql, each ``-- include: _part.sql`` line replaced
    by the text of that file."""
    text = (importlib.resources.files("courier.console") / "sql" / f"{name}.sql").read_text()
    return INCLUDE.sub(lambda included: sql(included["name"]), text)


def keyset_page(records: Sequence[Any], limit: int, make: Callable[[Any], T]) -> rows.Page[T]:
    """Rows fetched with LIMIT limit + 1: the extra row only says another page exists."""
    items = [make(record) for record in records[:limit]]
    more = len(records) > limit
    return rows.Page(items=items, next_after=rows_last_id(items) if more else None)


def rows_last_id(items: Sequence[Any]) -> int | None:
    return int(items[-1].id) if items else None


def client_row(record: asyncpg.Record) -> rows.ClientRow:
    return rows.ClientRow(**dict(record))


def queue_row(record: asyncpg.Record) -> rows.QueueRow:
    return rows.QueueRow(**dict(record))


def message_row(record: asyncpg.Record, *, dump: bool = False) -> rows.MessageRow:
    """A message row from its record, whose body is the whole body or its first bytes."""
    fields = {name: record[name] for name in MESSAGE_COLUMNS}
    shown = bodies.show(record["body"], record["body_bytes"], dump=dump)
    return rows.MessageRow(**fields, body_binary=shown.binary, body=shown.text)


def instance_row(record: asyncpg.Record) -> rows.InstanceRow:
    return rows.InstanceRow(**dict(record))


async def message_page(
    pool: asyncpg.Pool, query: str, key: int, paging: params.Paging
) -> rows.Page[rows.MessageRow]:
    """A page of an unfiltered message list; key ($1) is the client or queue listed."""
    records = await pool.fetch(sql(query), key, paging.after, paging.limit + 1, PREVIEW_BYTES)
    return keyset_page(records, paging.limit, message_row)


# -- overview ---------------------------------------------------------------------
async def counts(pool: asyncpg.Pool, count_cap: int) -> rows.Counts:
    record = await pool.fetchrow(sql("overview_counts"), count_cap)
    return rows.Counts(**dict(record))


async def live_instances(pool: asyncpg.Pool) -> list[rows.InstanceRow]:
    return [instance_row(record) for record in await pool.fetch(sql("live_instances"))]


async def message_counters(pool: asyncpg.Pool) -> tuple[int, int]:
    """Cumulative (inserted, deleted) row counts of the messages table."""
    record = await pool.fetchrow(sql("message_counters"))
    return int(record["inserted"]), int(record["deleted"])


# -- clients ----------------------------------------------------------------------
async def clients(
    pool: asyncpg.Pool, search: str, paging: params.Paging, count_cap: int
) -> rows.Page[rows.ClientRow]:
    records = await pool.fetch(sql("clients"), search, paging.after, paging.limit + 1, count_cap)
    return keyset_page(records, paging.limit, client_row)


async def topics(
    pool: asyncpg.Pool, paging: params.Paging, count_cap: int
) -> rows.Page[rows.TopicRow]:
    """A page of topics (``paging.limit`` of them, with all their subscriptions)."""
    records = await pool.fetch(sql("topics"), paging.after, paging.limit + 1, count_cap)
    found = [rows.TopicRow(**dict(record)) for record in records]
    return grouped_page(found, paging.limit, lambda row: row.topic)


def grouped_page(found: list[T], limit: int, group: Callable[[T], int]) -> rows.Page[T]:
    """Rows of at most limit + 1 groups (a topic and its subscriptions, ...), in
    group order: the extra group only says another page exists."""
    group_ids = list(dict.fromkeys(group(row) for row in found))
    if len(group_ids) <= limit:
        return rows.Page(items=found, next_after=None)
    last = group_ids[limit - 1]
    return rows.Page(items=[row for row in found if group(row) <= last], next_after=last)


async def client(pool: asyncpg.Pool, client_id: int, count_cap: int) -> rows.ClientRow:
    record = await pool.fetchrow(sql("client"), client_id, count_cap)
    if record is None:
        raise errors.ClientNotFound(f"client {client_id} does not exist")
    return client_row(record)


async def messages_sent_by(
    pool: asyncpg.Pool, client_id: int, paging: params.Paging
) -> rows.Page[rows.MessageRow]:
    return await message_page(pool, "messages_sent_by", client_id, paging)


async def messages_waiting_for(
    pool: asyncpg.Pool, client_id: int, paging: params.Paging
) -> rows.Page[rows.MessageRow]:
    return await message_page(pool, "messages_waiting_for", client_id, paging)


# -- queues -----------------------------------------------------------------------
async def queues(
    pool: asyncpg.Pool, search: str, paging: params.Paging, count_cap: int
) -> rows.Page[rows.QueueRow]:
    records = await pool.fetch(sql("queues"), search, paging.after, paging.limit + 1, count_cap)
    return keyset_page(records, paging.limit, queue_row)


async def queue(pool: asyncpg.Pool, queue_id: int, count_cap: int) -> rows.QueueRow:
    record = await pool.fetchrow(sql("queue"), queue_id, count_cap)
    if record is None:
        raise errors.QueueNotFound(f"queue {queue_id} does not exist")
    return queue_row(record)


async def queue_messages(
    pool: asyncpg.Pool,
    queue_id: int,
    filters: rows.MessageFilters,
    paging: params.Paging,
    scan_limit: int,
) -> rows.Page[rows.MessageRow]:
    """A page of a queue's messages. Filtered pages examine at most scan_limit
    messages, so a filter that matches little cannot make one request walk the queue."""
    if not filters.active:
        return await message_page(pool, "queue_messages", queue_id, paging)
    records = await pool.fetch(
        sql("queue_messages_filtered"),
        queue_id,
        paging.after,
        paging.limit + 1,
        PREVIEW_BYTES,
        filters.sender,
        filters.receiver,
        filters.priority,
        scan_limit,
    )
    if len(records) > paging.limit:
        return keyset_page(records, paging.limit, message_row)
    return await scan_page(pool, queue_id, paging, scan_limit, records)


async def scan_page(
    pool: asyncpg.Pool,
    queue_id: int,
    paging: params.Paging,
    scan_limit: int,
    records: Sequence[asyncpg.Record],
) -> rows.Page[rows.MessageRow]:
    """A short filtered page: either the queue ended or the scan budget ran out."""
    window = await pool.fetchrow(sql("queue_scan_window"), queue_id, paging.after, scan_limit)
    items = [message_row(record) for record in records]
    if window["scanned"] < scan_limit:
        return rows.Page(items=items, next_after=None)
    return rows.Page(items=items, next_after=int(window["last_id"]), scan_limited=True)


async def dead_letter_sources(pool: asyncpg.Pool, queue_id: int) -> list[rows.QueueRef]:
    """The queues that send their dead letters to queue_id."""
    records = await pool.fetch(sql("dead_letter_sources"), queue_id)
    return [rows.QueueRef(**dict(record)) for record in records]


# -- messages ---------------------------------------------------------------------
async def message(
    pool: asyncpg.Pool, message_id: int
) -> tuple[rows.MessageRow, rows.Whereabouts, bytes, dict[str, models.PropertyValue]]:
    """One message, visible or held: its row (a binary body as a hex dump), where it
    is, its body exactly as stored, and its properties (empty when none)."""
    record = await pool.fetchrow(sql("message"), message_id)
    if record is None:
        raise errors.NoMessage(f"message {message_id} does not exist")
    where = rows.Whereabouts(
        record["state"], record["visible_at"], record["holder"], record["holder_name"]
    )
    properties = jsonb.loads(record["properties"])
    return message_row(record, dump=True), where, bytes(record["body"]), properties


# -- cluster ----------------------------------------------------------------------
async def cluster_nodes(pool: asyncpg.Pool, own_dsn: str) -> list[tuple[rows.NodeRow, str]]:
    """Every node, as shown (its DSN's password masked), with the DSN to reach it."""
    found = []
    for record in await pool.fetch(sql("cluster_nodes"), own_dsn):
        shown = {**dict(record), "dsn": config.redact_dsn(record["dsn"])}
        found.append((rows.NodeRow(**shown), str(record["dsn"])))
    return found


async def replicated_members(
    pool: asyncpg.Pool, paging: params.Paging
) -> rows.Page[rows.MemberRow]:
    """A page of replicated queues (``paging.limit`` of them, with all their members)."""
    records = await pool.fetch(sql("replicated_members"), paging.after, paging.limit + 1)
    found = [rows.MemberRow(**dict(record)) for record in records]
    return grouped_page(found, paging.limit, lambda row: row.replicated)


async def member_lengths(
    pool: asyncpg.Pool, queue_ids: Sequence[int], count_cap: int
) -> dict[int, int | None]:
    """Visible messages of each queue, on the node holding them (capped)."""
    records = await pool.fetch(sql("member_lengths"), list(queue_ids), count_cap)
    return {int(record["queue"]): record["length"] for record in records}


async def member_totals(pool: asyncpg.Pool) -> dict[int, tuple[int, int]]:
    """Each member's running totals (stored in, taken from) over all middleware."""
    records = await pool.fetch(sql("member_totals"))
    return {int(r["queue"]): (int(r["sent"]), int(r["taken"])) for r in records}


async def cluster_decisions(pool: asyncpg.Pool, limit: int) -> list[rows.DecisionRow]:
    return [rows.DecisionRow(**dict(r)) for r in await pool.fetch(sql("cluster_decisions"), limit)]
