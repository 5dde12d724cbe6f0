"""Checking and normalising what callers pass to the client, before anything is sent."""

from __future__ import annotations

import secrets
import ssl
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TypedDict

from courier import config, errors, models, protocol, tls
from courier.client import connection

Servers = str | Sequence[str | connection.Address]
"""``"host:port,host:port"``, or a list of ``"host:port"`` strings or (host, port) pairs."""

MAX_TIMEOUT_MS = 0xFFFF_FFFF
"""Server-side waits travel as u32 milliseconds (about 49 days)."""


def addresses(servers: Servers) -> tuple[connection.Address, ...]:
    """Normalise the ways of naming servers to (host, port) pairs; ValueError if bad."""
    texts = [servers] if isinstance(servers, str) else servers
    found: list[connection.Address] = []
    for server in texts:
        if not isinstance(server, str):
            host, port = server
            found.append((host, int(port)))
            continue
        try:
            found.extend(config.parse_servers(server))
        except ValueError:
            raise ValueError(f"{server!r} is not a list of host:port server addresses") from None
    if not found:
        raise ValueError("no server address given")
    return tuple(found)


def tls_context(wanted: bool, ca: str | Path | None) -> ssl.SSLContext | None:
    """The SSL context of a client that wants TLS (a CA bundle implies it), else None."""
    if not wanted and ca is None:
        return None
    return tls.client_context(ca)


def new_context() -> int:
    """A fresh request context: random, positive, 63 bits (fits a signed BIGINT)."""
    return secrets.randbits(63) or 1


def milliseconds(seconds: float) -> int:
    if seconds < 0:
        raise errors.BadRequest(f"timeout must not be negative, not {seconds:g}")
    return min(round(seconds * 1000), MAX_TIMEOUT_MS)


def order(order: models.Order | str) -> models.Order:
    try:
        return models.Order(order)
    except ValueError:
        raise errors.BadRequest(f"order must be 'time' or 'priority', not {order!r}") from None


def mode(mode: models.ClientMode | str) -> models.ClientMode:
    try:
        return models.ClientMode(mode)
    except ValueError:
        raise errors.BadRequest(
            f"mode must be 'read_write', 'read_only' or 'admin', not {mode!r}"
        ) from None


def check_priority(priority: int) -> None:
    # Checked here too: the wire carries one byte, so 300 would not even encode.
    if not models.MIN_PRIORITY <= priority <= models.MAX_PRIORITY:
        raise errors.InvalidPriority(
            f"priority must be an integer from {models.MIN_PRIORITY} to {models.MAX_PRIORITY},"
            f" not {priority!r}"
        )


def message_properties(value: models.Properties | None) -> dict[str, models.PropertyValue]:
    """A message's properties, checked against the protocol's limits (at most 64,
    keys 1 to 255 bytes of UTF-8, values text of at most 4096 bytes, int64, finite
    floats or booleans); None means none."""
    if value is None:
        return {}
    problem = protocol.properties_problem(value)
    if problem:
        raise errors.BadRequest(problem)
    return dict(value)


def selector(value: str | None) -> str | None:
    """A read's selector as the wire carries it; the server parses it (BadSelector)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise errors.BadSelector(f"a selector is text, not {type(value).__name__}")
    if not value.strip():
        raise errors.BadSelector("a selector is empty; None selects every message")
    return value


class MessageFields(TypedDict):
    """What a SEND or a PUBLISH carries besides where the message goes."""

    body: bytes
    receiver: int | None
    priority: int
    context: int | None
    delay_ms: int
    ttl_ms: int | None
    dedup_id: str | None
    properties: dict[str, models.PropertyValue]
    persistent: bool


def message_fields(
    value: bytes | str,
    *,
    receiver: int | None,
    priority: int,
    context: int | None,
    delay: float | None,
    not_before: datetime | None,
    ttl: float | None,
    dedup_id: str | None,
    properties: models.Properties | None,
    persistent: bool = True,
) -> MessageFields:
    """A message's fields, each checked as ``send`` takes them (an empty dedup id is
    BadRequest: None means none; so is a dedup id on a non-persistent message)."""
    check_priority(priority)
    checked_body = body(value)
    checked_delay = delay_ms(delay, not_before)
    checked_ttl = positive_ms(ttl, "ttl")
    if dedup_id == "":
        raise errors.BadRequest("a dedup id must not be empty")
    if dedup_id is not None and not persistent:
        # The server refuses it too: a crash would lose the message, not its dedup id.
        raise errors.BadRequest(
            "a dedup id needs a persistent message (a database crash would lose the"
            " message and keep its dedup id)"
        )
    return MessageFields(
        body=checked_body, receiver=receiver, priority=priority, context=context,
        delay_ms=checked_delay, ttl_ms=checked_ttl, dedup_id=dedup_id,
        properties=message_properties(properties), persistent=persistent,
    )  # fmt: skip


def body(value: bytes | bytearray | memoryview | str) -> bytes:
    """A message body as bytes: text is encoded as UTF-8."""
    if isinstance(value, str):
        try:
            return value.encode()
        except UnicodeEncodeError as exc:
            raise errors.BadRequest(f"body text is not encodable as UTF-8 ({exc.reason})") from None
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    raise errors.BadRequest(f"a body is bytes or str, not {type(value).__name__}")


def delay_ms(delay: float | None, not_before: datetime | None) -> int:
    """Milliseconds to keep a message invisible: ``delay`` seconds, or until
    ``not_before`` (a timezone-aware time; one already past means none)."""
    if delay is not None and not_before is not None:
        raise errors.BadRequest("give delay or not_before, not both")
    if not_before is not None:
        if not_before.tzinfo is None:
            raise errors.BadRequest("not_before must be a timezone-aware datetime")
        delay = max((not_before - datetime.now(UTC)).total_seconds(), 0.0)
    if delay is None:
        return 0
    if delay < 0:
        raise errors.BadRequest(f"delay must not be negative, not {delay:g}")
    return min(round(delay * 1000), MAX_TIMEOUT_MS)


def positive_ms(seconds: float | None, what: str) -> int | None:
    """A positive duration in milliseconds (a ttl, a lease); None stays None."""
    if seconds is None:
        return None
    milliseconds = round(seconds * 1000)
    if milliseconds <= 0:
        raise errors.BadRequest(f"{what} must be at least 1 ms, not {seconds:g} s")
    return min(milliseconds, MAX_TIMEOUT_MS)


def delivery(delivery: models.Message | int) -> int:
    """The delivery id of a leased message (or the id itself)."""
    if isinstance(delivery, models.Message):
        if delivery.delivery is None:
            raise errors.BadRequest(
                f"message {delivery.id} was not taken with a lease: there is nothing to settle"
            )
        return delivery.delivery
    return delivery
