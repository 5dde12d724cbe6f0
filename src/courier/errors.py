"""Every failure a Courier user can cause, as data.

Each wire status code has exactly one exception class, and ``for_status`` is the one
table that maps codes to classes for server and client alike. A class's docstring
is its default message.

    CourierError
    ├── QueueNotFound          QUEUE_NOT_FOUND
    ├── QueueExists            QUEUE_EXISTS
    ├── QueueNotEmpty          QUEUE_NOT_EMPTY
    ├── NoMessage              NO_MESSAGE
    │   └── QueueEmpty         QUEUE_EMPTY
    ├── ClientNotFound         CLIENT_NOT_FOUND
    ├── ClientExists           CLIENT_EXISTS
    ├── ClientOnline           CLIENT_ONLINE
    ├── ServerFull             SERVER_FULL
    ├── BadRequest             BAD_REQUEST
    │   ├── InvalidPriority    INVALID_PRIORITY
    │   ├── PayloadTooLarge    PAYLOAD_TOO_LARGE
    │   └── BadSelector        BAD_SELECTOR
    ├── NotAuthorised          NOT_AUTHORISED
    │   └── NotLoggedIn        NOT_LOGGED_IN
    ├── Unavailable            UNAVAILABLE
    ├── InternalError          INTERNAL
    ├── LeaseExpired           LEASE_EXPIRED
    ├── QuotaExceeded          QUOTA_EXCEEDED
    ├── TopicNotFound          TOPIC_NOT_FOUND
    ├── TopicExists            TOPIC_EXISTS
    ├── TransactionExpired     TRANSACTION_EXPIRED
    ├── ProtocolError          (local: bytes that do not parse; sent as BAD_REQUEST)
    ├── ConnectionLost         (local: the connection dropped; the call's fate is unknown)
    │   └── TlsError           (local: TLS set up wrong, or a handshake failed)
    └── RequestTimeout         (local: no reply arrived in time)
"""

from __future__ import annotations

import enum
from typing import ClassVar


class Status(enum.IntEnum):
    """Response status codes carried on the wire (one byte)."""

    OK = 0
    QUEUE_NOT_FOUND = 1
    QUEUE_EXISTS = 2
    QUEUE_NOT_EMPTY = 3
    NO_MESSAGE = 4
    QUEUE_EMPTY = 5
    CLIENT_NOT_FOUND = 6
    CLIENT_EXISTS = 7
    CLIENT_ONLINE = 8
    SERVER_FULL = 9
    BAD_REQUEST = 10
    INVALID_PRIORITY = 11
    PAYLOAD_TOO_LARGE = 12
    NOT_AUTHORISED = 13
    NOT_LOGGED_IN = 14
    UNAVAILABLE = 15
    INTERNAL = 16
    LEASE_EXPIRED = 17
    QUOTA_EXCEEDED = 18
    BAD_SELECTOR = 19
    # The 0x30 block, beside the topic opcodes 0x30-0x3F.
    TOPIC_NOT_FOUND = 48
    TOPIC_EXISTS = 49
    TRANSACTION_EXPIRED = 50


class CourierError(Exception):
    """Courier failed."""

    status: ClassVar[Status] = Status.INTERNAL

    def __init__(self, message: str | None = None) -> None:
        self.message = message or self.default_message()
        super().__init__(self.message)

    @classmethod
    def default_message(cls) -> str:
        return (cls.__doc__ or cls.__name__).strip().splitlines()[0]


class QueueNotFound(CourierError):
    """Queue does not exist."""

    status = Status.QUEUE_NOT_FOUND


class QueueExists(CourierError):
    """Queue exists."""

    status = Status.QUEUE_EXISTS


class QueueNotEmpty(CourierError):
    """Queue is not empty."""

    status = Status.QUEUE_NOT_EMPTY


class NoMessage(CourierError):
    """No message matches."""

    status = Status.NO_MESSAGE


class QueueEmpty(NoMessage):
    """Queue is empty for you."""

    status = Status.QUEUE_EMPTY


class ClientNotFound(CourierError):
    """No such client."""

    status = Status.CLIENT_NOT_FOUND


class ClientExists(CourierError):
    """A client with that name exists."""

    status = Status.CLIENT_EXISTS


class ClientOnline(CourierError):
    """Client is already online."""

    status = Status.CLIENT_ONLINE


class ServerFull(CourierError):
    """Server is full."""

    status = Status.SERVER_FULL


class BadRequest(CourierError):
    """Bad request."""

    status = Status.BAD_REQUEST


class InvalidPriority(BadRequest):
    """Priority must be an integer from 1 to 10."""

    status = Status.INVALID_PRIORITY


class PayloadTooLarge(BadRequest):
    """Message body is too large."""

    status = Status.PAYLOAD_TOO_LARGE

    def __init__(
        self, message: str | None = None, *, size: int | None = None, limit: int | None = None
    ) -> None:
        self.size = size
        self.limit = limit
        if message is None and size is not None and limit is not None:
            message = f"message body is {size} bytes; the limit is {limit}"
        super().__init__(message)


class BadSelector(BadRequest):
    """The selector does not parse, or is beyond a selector's limits."""

    status = Status.BAD_SELECTOR

    def __init__(self, message: str | None = None, *, position: int | None = None) -> None:
        self.position = position  # 0-based character where it failed, when known
        super().__init__(message)


class NotAuthorised(CourierError):
    """Not authorised."""

    status = Status.NOT_AUTHORISED


class NotLoggedIn(NotAuthorised):
    """Log in first."""

    status = Status.NOT_LOGGED_IN


class Unavailable(CourierError):
    """The database is unavailable; try again."""

    status = Status.UNAVAILABLE


class InternalError(CourierError):
    """Internal server error."""

    status = Status.INTERNAL


class LeaseExpired(CourierError):
    """Delivery is no longer held: its lease ran out, or it was acknowledged or released."""

    status = Status.LEASE_EXPIRED


class QuotaExceeded(CourierError):
    """A quota is used up: a client created as many queues as it may."""

    status = Status.QUOTA_EXCEEDED


class TopicNotFound(CourierError):
    """Topic does not exist."""

    status = Status.TOPIC_NOT_FOUND


class TopicExists(CourierError):
    """Topic exists."""

    status = Status.TOPIC_EXISTS


class TransactionExpired(CourierError):
    """The transaction was open too long: nothing of it was applied."""

    status = Status.TRANSACTION_EXPIRED


class ProtocolError(CourierError):
    """Bytes on the connection are not a valid Courier frame."""

    status = Status.BAD_REQUEST


class ConnectionLost(CourierError):
    """The connection was lost; the call may or may not have taken effect."""

    status = Status.UNAVAILABLE


class TlsError(ConnectionLost):
    """TLS failed: a certificate, key or CA file is unusable, or a handshake failed.

    Also what a client gets when it and the server disagree about TLS (one speaks
    it, the other does not): the server cannot be used as configured.
    """


class RequestTimeout(CourierError):
    """No reply arrived in time."""

    status = Status.UNAVAILABLE


_BY_STATUS: dict[Status, type[CourierError]] = {
    cls.status: cls
    for cls in (
        QueueNotFound,
        QueueExists,
        QueueNotEmpty,
        NoMessage,
        QueueEmpty,
        ClientNotFound,
        ClientExists,
        ClientOnline,
        ServerFull,
        BadRequest,
        InvalidPriority,
        PayloadTooLarge,
        BadSelector,
        NotAuthorised,
        NotLoggedIn,
        Unavailable,
        InternalError,
        LeaseExpired,
        QuotaExceeded,
        TopicNotFound,
        TopicExists,
        TransactionExpired,
    )
}


def in_batch(number: int, exc: CourierError) -> CourierError:
    """The same error, naming the message of a batch it is about (numbered from 1)."""
    return type(exc)(f"message {number} of the batch: {exc.message}")


def in_transaction(number: int, exc: CourierError) -> CourierError:
    """The same error, naming the operation of a transaction it is about (from 1)."""
    return type(exc)(f"operation {number} of the transaction: {exc.message}")


def for_status(status: int, message: str | None = None) -> CourierError:
    """The exception for a non-OK wire status; unknown codes become InternalError."""
    try:
        cls = _BY_STATUS[Status(status)]
    except (ValueError, KeyError):
        return InternalError(message or f"unknown status code {status}")
    return cls(message)
