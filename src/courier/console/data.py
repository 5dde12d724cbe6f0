"""What each page shows, assembled from queries; the JSON API and the HTML share it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from courier import models
from courier.console import bodies, params, queries, rows, state


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
