"""Batches as callers give them: ``Outgoing`` messages, and their checks before sending.

A batch send takes plain bodies, which get the call's receiver, priority and so on,
or ``Outgoing`` messages, whose own fields win where they are given:

    await client.send_many("jobs", [b"a", Outgoing(b"b", priority=9), "c"], priority=3)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from courier import errors, models, protocol
from courier.client import arguments

MAX_BATCH = protocol.MAX_BATCH_MESSAGES


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One message of a ``send_many``; a field left None takes the call's value. The
    receiver is a client id, or its name (looked up before the batch is sent)."""

    body: bytes | str
    receiver: int | str | None = None
    priority: int | None = None
    context: int | None = None
    delay: float | None = None
    not_before: datetime | None = None
    ttl: float | None = None
    dedup_id: str | None = None
    properties: models.Properties | None = None
    persistent: bool | None = None


@dataclass(frozen=True, slots=True)
class Defaults:
    """A ``send_many`` call's own fields, for the messages that leave them out."""

    receiver: int | None = None
    priority: int = models.DEFAULT_PRIORITY
    context: int | None = None
    delay: float | None = None
    not_before: datetime | None = None
    ttl: float | None = None
    properties: models.Properties | None = None
    persistent: bool = True


Message = bytes | str | Outgoing


class NamedReceivers(Exception):
    """``drafts`` met receivers given by name: look ``names`` up, then draft the batch
    again with their ids. Each name maps to the number of the first message giving
    it, for an error about it."""

    def __init__(self, names: dict[str, int]) -> None:
        super().__init__(", ".join(sorted(names)))
        self.names = names


def drafts(
    messages: Iterable[Message],
    defaults: Defaults,
    receiver_ids: Mapping[str, int] | None = None,
) -> tuple[models.Draft, ...]:
    """The batch as the wire carries it; BadRequest before anything is sent when it is
    empty, too long, or a message in it is malformed (its number said). A receiver
    given by name takes its id from ``receiver_ids``; NamedReceivers when some are
    not there (the caller looks them up and drafts again: a batch of ids alone is
    looked at once)."""
    batch = tuple(messages)
    if not batch:
        raise errors.BadRequest("a batch needs at least one message")
    if len(batch) > MAX_BATCH:
        raise errors.BadRequest(
            f"a batch holds at most {MAX_BATCH} messages, not {len(batch)}: send it in parts"
        )
    plain = draft(b"", defaults)  # the call's own fields, checked once
    made = []
    unknown: dict[str, int] = {}
    for number, message in enumerate(batch, 1):
        try:
            if isinstance(message, Outgoing):
                if isinstance(message.receiver, str):
                    found = (receiver_ids or {}).get(message.receiver)
                    if found is None:
                        unknown.setdefault(message.receiver, number)
                        continue
                    message = dataclasses.replace(message, receiver=found)
                made.append(draft(message, defaults))
            else:
                made.append(
                    models.Draft(
                        arguments.body(message),
                        plain.receiver,
                        plain.priority,
                        plain.context,
                        plain.delay_ms,
                        plain.ttl_ms,
                        properties=plain.properties,
                        persistent=plain.persistent,
                    )
                )
        except errors.CourierError as exc:
            raise errors.in_batch(number, exc) from None
    if unknown:
        raise NamedReceivers(unknown)
    return tuple(made)


def draft(message: bytes | str | Outgoing, defaults: Defaults) -> models.Draft:
    if not isinstance(message, Outgoing):
        message = Outgoing(message)
    timed = message.delay is not None or message.not_before is not None
    receiver = defaults.receiver if message.receiver is None else message.receiver
    if isinstance(receiver, str):
        raise TypeError(f"receiver {receiver!r}: a name is looked up before the batch is drafted")
    return models.Draft(**arguments.message_fields(
        message.body,
        receiver=receiver,
        priority=defaults.priority if message.priority is None else message.priority,
        context=defaults.context if message.context is None else message.context,
        delay=message.delay if timed else defaults.delay,
        not_before=message.not_before if timed else defaults.not_before,
        ttl=defaults.ttl if message.ttl is None else message.ttl,
        dedup_id=message.dedup_id,
        properties=defaults.properties if message.properties is None else message.properties,
        persistent=defaults.persistent if message.persistent is None else message.persistent,
    ))  # fmt: skip


def counted(count: int, what: str) -> int:
    """A batch read's count, from 1 to the protocol's limit."""
    if not 1 <= count <= MAX_BATCH:
        raise errors.BadRequest(f"{what} must be from 1 to {MAX_BATCH}, not {count}")
    return count


def deliveries(batch: Iterable[models.Message | int]) -> tuple[int, ...]:
    """The delivery ids of leased messages (or the ids themselves), 1 to the limit."""
    ids = tuple(arguments.delivery(one) for one in batch)
    counted(len(ids), "the number of deliveries")
    return ids
