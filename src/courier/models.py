"""Value objects shared by every tier: what a queue, a message and a client are."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

MIN_PRIORITY = 1
MAX_PRIORITY = 10
DEFAULT_PRIORITY = 5

PropertyValue = str | int | float | bool
"""A property's value: text, a 64-bit integer, a finite double or a boolean (a bool
is a bool, never the integer it subclasses)."""

Properties = Mapping[str, PropertyValue]
"""A message's properties: text keys to typed values."""


class ClientMode(enum.StrEnum):
    """What a client may do: read-only clients can read but never send; an admin can
    do everything, to any client and any queue."""

    READ_WRITE = "read_write"
    READ_ONLY = "read_only"
    ADMIN = "admin"


class Order(enum.StrEnum):
    """Which visible message a read takes first."""

    TIME = "time"  # oldest first
    PRIORITY = "priority"  # highest priority first, ties oldest first


class Overflow(enum.StrEnum):
    """What a queue at its limit does with one more message."""

    REFUSE = "refuse"  # the send fails with QUOTA_EXCEEDED
    DROP_OLDEST = "drop_oldest"  # the oldest visible messages make room


@dataclass(frozen=True, slots=True)
class Queue:
    id: int
    name: str
    message_count: int = 0


@dataclass(frozen=True, slots=True)
class Subscription:
    """A subscription to a topic: a queue of its own (``queue``, ``queue_name``) that
    gets a copy of every message published to the topic, read like any queue."""

    queue: int
    queue_name: str
    topic: int
    name: str
    durable: bool
    subscriber: int
    backlog: int = 0
    """Visible messages waiting in the queue, counted up to 10,000."""


@dataclass(frozen=True, slots=True)
class Topic:
    id: int
    name: str
    subscriptions: tuple[Subscription, ...] = ()


class Policy(enum.StrEnum):
    """How a replicated queue gives its members to the producers and consumers that
    join it."""

    BALANCED = "balanced"  # each member an equal share of producers and of consumers
    ROUND_ROBIN = "round_robin"  # the next member in turn, whatever the role


class Role(enum.StrEnum):
    """What a client joins a replicated queue as."""

    PRODUCER = "producer"
    CONSUMER = "consumer"


@dataclass(frozen=True, slots=True)
class Replica:
    """One member of a replicated queue: an ordinary queue (``queue``, ``queue_name``)
    on ``node``, with the producers and consumers that joined it and its ``length``
    (ready messages, counted up to 10,000)."""

    member: int
    queue: int
    queue_name: str
    node: int
    producers: int = 0
    consumers: int = 0
    length: int = 0


@dataclass(frozen=True, slots=True)
class ReplicatedQueue:
    """A queue spread over members on distinct nodes (docs/nodes.md)."""

    id: int
    name: str
    policy: Policy
    members: tuple[Replica, ...] = ()


@dataclass(frozen=True, slots=True)
class Place:
    """A producer's or consumer's place in a replicated queue: the member it was given
    (``queue`` is that member's queue) until it leaves or its session ends."""

    id: int
    member: int
    queue: int
    queue_name: str
    replicas: int


@dataclass(frozen=True, slots=True)
class QueueSettings:
    """How a queue treats messages that fail: after ``max_deliveries`` deliveries a
    message moves to ``dead_letter_queue`` (or is dropped without one), and with
    ``dead_letter_expired`` a message whose ttl ran out moves there too.

    Its limits: at most ``max_messages`` messages and ``max_bytes`` bytes of bodies
    (None: no limit), leased and delayed ones included; ``overflow`` says what one more
    message does."""

    queue: int
    max_deliveries: int | None = None
    dead_letter_queue: int | None = None
    dead_letter_expired: bool = False
    max_messages: int | None = None
    max_bytes: int | None = None
    overflow: Overflow = Overflow.REFUSE


@dataclass(frozen=True, slots=True)
class QueueAcl:
    """Who may send to a queue (``senders``) and who may read it (``readers``): client
    ids, sorted, or None for anyone (the default). The queue's owner and admins may
    always do both."""

    queue: int
    senders: tuple[int, ...] | None = None
    readers: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class Message:
    """A stored message. ``body`` is bytes; ``text`` decodes it as UTF-8.

    A message taken with a lease carries its ``delivery`` id (acknowledge it with
    that id); ``deliveries`` counts how often it was leased, this time included. A
    dead letter names the queue it ``dead_from`` and the last ``failure`` given.
    ``properties`` are the sender's text keys and typed values (empty when none).
    """

    id: int
    queue: int
    sender: int
    receiver: int | None
    context: int | None
    priority: int
    created_at: datetime
    body: bytes
    delivery: int | None = None
    deliveries: int = 0
    dead_from: int | None = None
    failure: str | None = None
    properties: dict[str, PropertyValue] = field(default_factory=dict, hash=False)

    @property
    def text(self) -> str:
        """The body as text; UnicodeDecodeError when it is not UTF-8."""
        return self.body.decode()


@dataclass(frozen=True, slots=True)
class Draft:
    """One message of a batch send as the server takes it: what may differ from one
    message to the next (the queues are the batch's)."""

    body: bytes
    receiver: int | None = None
    priority: int = DEFAULT_PRIORITY
    context: int | None = None
    delay_ms: int = 0
    ttl_ms: int | None = None
    dedup_id: str | None = None
    properties: Properties = field(default_factory=dict, hash=False)
    persistent: bool = True

    @property
    def plain(self) -> bool:
        """No delay, expiry or dedup id: the set-based path stores it (properties
        included)."""
        return not self.delay_ms and self.ttl_ms is None and self.dedup_id is None


@dataclass(frozen=True, slots=True)
class Settled:
    """What became of one delivery of an ack_many or nack_many: ``status`` 0 (OK) when
    it was settled, else the wire status of why not (17, LEASE_EXPIRED: the lease ran
    out, or it was settled already) with ``message`` saying so."""

    delivery: int
    status: int = 0
    message: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == 0


@dataclass(frozen=True, slots=True)
class ClientInfo:
    id: int
    name: str
    mode: ClientMode
    online: bool = False


@dataclass(frozen=True, slots=True)
class ClientIdentity:
    """Another client as any logged-in client may see it (GET_CLIENT): its id and name
    only, since its mode and whether it is online are no other client's business."""

    id: int
    name: str


@dataclass(frozen=True, slots=True)
class Verifier:
    """What a server keeps of a client's secret (SCRAM-SHA-256, RFC 5802/7677): the
    PBKDF2 salt and iteration count, StoredKey and ServerKey. The secret cannot be
    recovered from it; ``courier.scram.verifier`` derives one."""

    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


@dataclass(frozen=True, slots=True)
class Instance:
    """A running middleware server, as the registry in the database knows it."""

    id: int
    address: str
    started_at: datetime
    heartbeat_at: datetime
