"""The message ids a client record carries, from each kind of reply."""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from courier import models, protocol
from courier.client import measurement_hook
from courier.protocol import names

SENT_AT = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def message(message_id: int, queue: int) -> models.Message:
    return models.Message(message_id, queue, 1, None, None, 5, SENT_AT, b"x")


def test_a_send_carries_one_id_per_queue_in_queue_order() -> None:
    send = protocol.Send((4, 2), b"x", None, 5, None)
    assert measurement_hook.message_ids(send, protocol.MessageIdsReply((10, 11))) == (
        (10, 11),
        (4, 2),
    )


def test_a_read_carries_the_id_it_read_and_other_replies_none() -> None:
    read = protocol.Read(3, None, models.Order.PRIORITY, pop=True)
    assert measurement_hook.message_ids(read, protocol.MessageReply(message(7, 3))) == (
        (7,),
        (3,),
    )
    assert measurement_hook.message_ids(protocol.Ping(), protocol.Done()) == ((), ())
    assert names.operation_name(read, "read") == "pop"
    peek = protocol.Read(3, None, models.Order.PRIORITY, pop=False)
    assert names.operation_name(peek, "read") == "peek"


@dataclass(frozen=True)
class ManyRead:  # the shape of a batch read's reply
    messages: tuple[models.Message, ...]


@dataclass(frozen=True)
class ManySent:  # the shape of a batch send: per message, one id per queue
    ids: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class SendToMany:
    queue_ids: tuple[int, ...]


def test_batch_replies_carry_every_id() -> None:
    read = ManyRead((message(7, 3), message(8, 4)))
    assert measurement_hook.message_ids(protocol.Ping(), read) == ((7, 8), (3, 4))  # type: ignore[arg-type]
    sent = ManySent(((20, 21), (22, 23), (24, 25)))
    assert measurement_hook.message_ids(SendToMany((1, 2)), sent) == (  # type: ignore[arg-type]
        (20, 21, 22, 23, 24, 25),
        (1, 2, 1, 2, 1, 2),
    )


def test_a_commit_carries_the_ids_its_sends_and_publishes_stored_in_order() -> None:
    send = protocol.Send((4, 2), b"x", None, 5, None)
    publish = protocol.Publish(None, "news", b"x", None, 5, None)
    commit = protocol.Commit(3, (protocol.Ack(99), send, publish))
    reply = protocol.CommitReply(((), (10, 11), (12, 13, 14)))
    assert measurement_hook.message_ids(commit, reply) == (
        (10, 11, 12, 13, 14),
        (4, 2, 0, 0, 0),  # a publish's reply does not name its copies' queues
    )
