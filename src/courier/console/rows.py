"""What the console shows, as typed rows; ``jsonable`` turns them into the JSON API."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Counts:
    """The overview's totals. ``messages_exact`` is false when the message count is
    the planner's estimate (above the console's count cap)."""

    clients_total: int
    clients_online: int
    queues_total: int
    messages_total: int
    messages_exact: bool


@dataclass(frozen=True, slots=True)
class InstanceRow:
    id: int
    address: str
    started_at: datetime
    heartbeat_at: datetime
    heartbeat_age_s: float
    clients: int


@dataclass(frozen=True, slots=True)
class ClientRow:
    """A client; ``sent`` and ``waiting`` count stored messages (capped, see docs)."""

    id: int
    name: str
    mode: str
    online: bool
    instance: int | None
    created_at: datetime
    sent: int
    waiting: int


@dataclass(frozen=True, slots=True)
class QueueRow:
    """A queue. ``messages`` counts the visible ones; ``leased`` (taken, not yet
    acknowledged) and ``delayed`` ones are held apart until they are due. After
    ``max_deliveries`` (None: no limit) a message moves to the dead-letter queue.
    Beyond ``max_messages`` or ``max_bytes`` (None: no limit) a send is refused or
    the oldest messages are dropped, as ``overflow`` says. ``senders`` and
    ``readers`` name the clients that may send to and read the queue besides its
    owner and admins (None: anyone)."""

    id: int
    name: str
    created_at: datetime
    messages: int
    oldest_at: datetime | None
    oldest_age_s: float | None
    leased: int
    delayed: int
    max_deliveries: int | None
    dead_letter_queue: int | None
    dead_letter_queue_name: str | None
    dead_letter_expired: bool
    max_messages: int | None
    max_bytes: int | None
    overflow: str
    senders: list[str] | None = None
    readers: list[str] | None = None


@dataclass(frozen=True, slots=True)
class QueueRef:
    id: int
    name: str


@dataclass(frozen=True, slots=True)
class MessageRow:
    """A stored message. ``body`` is its text, or its bytes in hex when
    ``body_binary``; in lists only a preview of the first bytes. ``body_bytes`` is
    the whole body's length. A dead letter names the queue it failed in
    (``dead_from``); ``failure`` is the last reason a reader gave."""

    id: int
    queue: int
    queue_name: str
    sender: int
    sender_name: str | None
    receiver: int | None
    receiver_name: str | None
    context: int | None
    priority: int
    created_at: datetime
    age_s: float
    deliveries: int
    dead_from: int | None
    dead_from_name: str | None
    failure: str | None
    body_bytes: int
    body_binary: bool
    body: str


@dataclass(frozen=True, slots=True)
class Whereabouts:
    """Where a message is: ``visible`` in its queue, or held until ``visible_at``,
    ``leased`` to ``holder`` or ``delayed``."""

    state: str
    visible_at: datetime | None
    holder: int | None
    holder_name: str | None

    @property
    def held(self) -> bool:
        return self.state != "visible"


@dataclass(frozen=True, slots=True)
class TopicRow:
    """One subscription of a topic, or a topic without any (subscription fields None).
    A subscription is a queue: ``backlog`` counts its visible messages, ``held`` its
    leased and delayed ones. ``kind`` is durable or non-durable."""

    topic: int
    topic_name: str
    queue: int | None
    queue_name: str | None
    subscription: str | None
    kind: str | None
    subscriber: int | None
    subscriber_name: str | None
    backlog: int | None
    held: int | None


@dataclass(frozen=True, slots=True)
class NodeRow:
    """A database node. ``dsn`` has its password masked; ``queues`` counts the queues
    it holds; ``error`` says why the console could not read it (None: it could, or
    it was not asked, being removed)."""

    id: int
    dsn: str
    state: str
    capacity: int | None
    queues: int
    error: str | None = None


@dataclass(frozen=True, slots=True)
class MemberRow:
    """One member of a replicated queue, or a replicated queue without any (member
    fields None). ``queue_page`` is the member queue's id when its page is in this
    console (it lives on node 1), else None. ``length`` counts its visible messages
    on its node (capped; None when the node could not be read); ``produced_per_s``
    and ``consumed_per_s`` are the messages stored in it and taken from it per
    second over the last few seconds, as the middleware report them (None until
    two reports were read)."""

    replicated: int
    name: str
    policy: str
    member: int | None
    node: int | None
    queue: int | None
    queue_name: str | None
    producers: int | None
    consumers: int | None
    queue_page: int | None = None
    length: int | None = None
    produced_per_s: float | None = None
    consumed_per_s: float | None = None


@dataclass(frozen=True, slots=True)
class DecisionRow:
    """What the provisioning controller decided: ``add`` or ``remove`` member
    ``member`` on ``node``, or ``move`` ``moved`` messages from member ``member`` to
    node ``node``; and the replicated queue's clients, capacity, load and length then."""

    id: int
    decided_at: datetime
    replicated: str
    decision: str
    member: int
    node: int
    moved: int
    clients: int
    capacity: int
    load: float
    length: int


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One keyset page: ``next_after`` is the cursor for the next page, None at the end.
    ``scan_limited`` says the page stopped because it examined its budget of rows."""

    items: list[T]
    next_after: int | None
    scan_limited: bool = False


@dataclass(frozen=True, slots=True)
class MessageFilters:
    sender: int | None = None
    receiver: int | None = None  # 0 selects messages for anyone (no receiver)
    priority: int | None = None

    @property
    def active(self) -> bool:
        return any(value is not None for value in (self.sender, self.receiver, self.priority))


@dataclass(frozen=True, slots=True)
class RatePoint:
    at: float  # seconds since the epoch, end of the interval
    sent: float  # messages stored per second
    popped: float  # messages removed per second


@dataclass(frozen=True, slots=True)
class Rates:
    now: float
    interval_s: float
    window_s: int
    sent_per_s: float  # averaged over the last few seconds
    popped_per_s: float
    sent_in_window: int  # messages stored between the first and the last sample
    popped_in_window: int  # messages removed between the first and the last sample
    points: list[RatePoint] = field(default_factory=list)


def jsonable(value: Any) -> Any:
    """Rows, pages and containers of them as JSON-ready values (datetimes in ISO 8601)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {key: jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(item) for item in value]
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat() if value.tzinfo else value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        raise TypeError("bytes are not JSON: show them as text or hex first (console.bodies)")
    return value
