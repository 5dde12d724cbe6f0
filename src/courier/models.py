"""Value objects shared by every tier: what a queue, a message and a client are."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime

MIN_PRIORITY = 1
MAX_PRIORITY = 10
DEFAULT_PRIORITY = 5


class ClientMode(enum.StrEnum):
    """What a client may do: read-only clients can read but never send."""

    READ_WRITE = "read_write"
    READ_ONLY = "read_only"


class Order(enum.StrEnum):
    """Which visible message a read takes first."""

    TIME = "time"  # oldest first
    PRIORITY = "priority"  # highest priority first, ties oldest first


@dataclass(frozen=True, slots=True)
class Queue:
    id: int
    name: str
    message_count: int = 0


@dataclass(frozen=True, slots=True)
class Message:
    id: int
    queue: int
    sender: int
    receiver: int | None
    context: int | None
    priority: int
    created_at: datetime
    body: str


@dataclass(frozen=True, slots=True)
class ClientInfo:
    id: int
    name: str
    mode: ClientMode
    online: bool = False


@dataclass(frozen=True, slots=True)
class Instance:
    """A running middleware server, as the registry in the database knows it."""

    id: int
    address: str
    started_at: datetime
    heartbeat_at: datetime
