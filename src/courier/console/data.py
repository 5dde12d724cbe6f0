"""What each page shows, assembled from queries; the JSON API and the HTML share it."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

import asyncpg

from courier import models
from courier.console import bodies, member_rates, node_pools, params, queries, rows, state
from courier.db import nodes

DECISIONS_SHOWN = 50
NODE_FAILURES = (OSError, ValueError, asyncpg.PostgresError, asyncpg.InterfaceError)


@dataclass(frozen=True, slots=True)
class Overview:
    counts: rows.Counts
    instances: list[rows.InstanceRow]
    count_cap: int


@dataclass(frozen=True, slots=True)
class ClientList:
    search: str
    clients: rows.Page[rows.ClientRow]
    count_cap: int


@dataclass(frozen=True, slots=True)
class ClientDetail:
    client: rows.ClientRow
    sent: rows.Page[rows.MessageRow]
    waiting: rows.Page[rows.MessageRow]
    count_cap: int


@dataclass(frozen=True, slots=True)
class QueueList:
    search: str
    queues: rows.Page[rows.QueueRow]
    count_cap: int


@dataclass(frozen=True, slots=True)
class TopicList:
    topics: rows.Page[rows.TopicRow]
    count_cap: int


@dataclass(frozen=True, slots=True)
class Cluster:
    """The nodes; a page of replicated queues, one row per member; and the
    controller's latest decisions, newest first."""

    nodes: list[rows.NodeRow]
    members: rows.Page[rows.MemberRow]
    decisions: list[rows.DecisionRow]
    count_cap: int


@dataclass(frozen=True, slots=True)
class QueueDetail:
    """A queue and a page of its messages; ``dead_letter_sources`` are the queues
    whose dead letters come here."""

    queue: rows.QueueRow
    dead_letter_sources: list[rows.QueueRef]
    filters: rows.MessageFilters
    messages: rows.Page[rows.MessageRow]
    count_cap: int


@dataclass(frozen=True, slots=True)
class MessageDetail:
    """A message with its whole body: shown (text, or a hex dump when binary) in
    ``message.body``, and exactly, base64-encoded, in ``body_base64``; and the
    properties its sender gave it (empty when none)."""

    message: rows.MessageRow
    whereabouts: rows.Whereabouts
    body_base64: str
    properties: dict[str, models.PropertyValue] = field(default_factory=dict)


async def overview(console: state.ConsoleState) -> Overview:
    cap = console.settings.count_cap
    return Overview(
        counts=await queries.counts(console.pool, cap),
        instances=await queries.live_instances(console.pool),
        count_cap=cap,
    )


async def client_list(console: state.ConsoleState, query: Mapping[str, str]) -> ClientList:
    search = params.search(query)
    paging = params.paging(query, console.settings.page_size)
    cap = console.settings.count_cap
    page = await queries.clients(console.pool, search, paging, cap)
    return ClientList(search=search, clients=page, count_cap=cap)


async def client_detail(
    console: state.ConsoleState, client_id: int, query: Mapping[str, str]
) -> ClientDetail:
    size = console.settings.page_size
    cap = console.settings.count_cap
    client = await queries.client(console.pool, client_id, cap)
    sent_paging = params.paging(query, size, after_name="sent_after")
    waiting_paging = params.paging(query, size, after_name="waiting_after")
    return ClientDetail(
        client=client,
        sent=await queries.messages_sent_by(console.pool, client_id, sent_paging),
        waiting=await queries.messages_waiting_for(console.pool, client_id, waiting_paging),
        count_cap=cap,
    )


async def queue_list(console: state.ConsoleState, query: Mapping[str, str]) -> QueueList:
    search = params.search(query)
    paging = params.paging(query, console.settings.page_size)
    cap = console.settings.count_cap
    page = await queries.queues(console.pool, search, paging, cap)
    return QueueList(search=search, queues=page, count_cap=cap)


async def queue_detail(
    console: state.ConsoleState, queue_id: int, query: Mapping[str, str]
) -> QueueDetail:
    cap = console.settings.count_cap
    queue = await queries.queue(console.pool, queue_id, cap)
    filters = params.message_filters(query)
    paging = params.paging(query, console.settings.page_size)
    page = await queries.queue_messages(
        console.pool, queue_id, filters, paging, console.settings.scan_limit
    )
    return QueueDetail(
        queue=queue,
        dead_letter_sources=await queries.dead_letter_sources(console.pool, queue_id),
        filters=filters,
        messages=page,
        count_cap=cap,
    )


async def message_detail(console: state.ConsoleState, message_id: int) -> MessageDetail:
    message, whereabouts, body, properties = await queries.message(console.pool, message_id)
    return MessageDetail(message, whereabouts, bodies.base64_text(body), properties)


async def topic_list(console: state.ConsoleState, query: Mapping[str, str]) -> TopicList:
    paging = params.paging(query, console.settings.page_size)
    cap = console.settings.count_cap
    return TopicList(topics=await queries.topics(console.pool, paging, cap), count_cap=cap)


async def cluster(console: state.ConsoleState, query: Mapping[str, str]) -> Cluster:
    paging = params.paging(query, console.settings.page_size)
    cap = console.settings.count_cap
    listed = await queries.cluster_nodes(console.pool, console.settings.dsn)
    page = await queries.replicated_members(console.pool, paging)
    reads = await asyncio.gather(
        *(node_lengths(console, row, dsn, page.items) for row, dsn in listed)
    )
    lengths = {queue: length for found, _ in reads for queue, length in found.items()}
    rates = console.members.rates()
    return Cluster(
        nodes=[
            dataclasses.replace(row, error=error)
            for (row, _), (_, error) in zip(listed, reads, strict=True)
        ],
        members=dataclasses.replace(
            page, items=[with_numbers(m, lengths, rates) for m in page.items]
        ),
        decisions=await queries.cluster_decisions(console.pool, DECISIONS_SHOWN),
        count_cap=cap,
    )


async def node_lengths(
    console: state.ConsoleState, node: rows.NodeRow, dsn: str, members: list[rows.MemberRow]
) -> tuple[dict[int, int | None], str | None]:
    """The lengths of the members ``node`` holds, read on it, and why it could not be
    read (None when it could). Every active node is read, so each shows whether the
    console reaches it; node 1 is the console's own database."""
    queue_ids = [m.queue for m in members if m.node == node.id and m.queue is not None]
    cap = console.settings.count_cap
    if node.id == nodes.CONTROL_NODE:
        return await queries.member_lengths(console.pool, queue_ids, cap), None
    if node.state != "active":
        return {}, None
    try:
        pool = await console.node_pools.pool(node.id, dsn)
        return await queries.member_lengths(pool, queue_ids, cap), None
    except NODE_FAILURES as exc:
        return {}, node_pools.failure(dsn, exc)


def with_numbers(
    member: rows.MemberRow,
    lengths: dict[int, int | None],
    rates: dict[int, member_rates.MemberRate],
) -> rows.MemberRow:
    """A member row with its length, rates and, on node 1, its queue page."""
    if member.queue is None:
        return member
    rate = rates.get(member.queue)
    return dataclasses.replace(
        member,
        queue_page=member.queue if member.node == nodes.CONTROL_NODE else None,
        length=lengths.get(member.queue),
        produced_per_s=rate.produced if rate else None,
        consumed_per_s=rate.consumed if rate else None,
    )
