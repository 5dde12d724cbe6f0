"""COMMIT carries only SENDs, PUBLISHes and ACKs, at most 1000, and a PublishReply
pairs every queue with one message id."""

from __future__ import annotations

import struct

import pytest

from courier import errors, models, protocol

HEADER = struct.Struct(">BBHII")


def parse_request(opcode: int, body: bytes) -> protocol.Request | protocol.Reply:
    (raw,) = protocol.Decoder().feed(HEADER.pack(1, opcode, 0, 1, len(body)) + body)
    return protocol.parse(raw)


def test_a_commit_carrying_another_request_is_malformed() -> None:
    read = protocol.encode(1, protocol.Read(7, None, models.Order.TIME, pop=True))
    body = struct.pack(">IH", 0, 1) + bytes([protocol.Opcode.READ]) + read[protocol.HEADER_SIZE :]
    with pytest.raises(errors.ProtocolError, match="SEND, PUBLISH and ACK"):
        parse_request(protocol.Opcode.COMMIT, body)


def test_a_commit_of_more_than_1000_operations_is_refused_both_ways() -> None:
    acks = tuple(protocol.Ack(n) for n in range(1, 1002))
    with pytest.raises(protocol.EncodeError, match="at most 1000"):
        protocol.encode(1, protocol.Commit(0, acks))
    with pytest.raises(errors.ProtocolError, match="at most 1000"):
        parse_request(protocol.Opcode.COMMIT, struct.pack(">IH", 0, 1001))


def test_a_commit_round_trips_its_operations_in_order() -> None:
    operations = (
        protocol.Ack(3),
        protocol.Send((1, 2), b"x", None, 5, None, 10, 2000, "d"),
        protocol.Publish(None, "news", b"y", 4, 9, -1),
    )
    data = protocol.encode(5, protocol.Commit(1234, operations))
    assert parse_request(protocol.Opcode.COMMIT, data[protocol.HEADER_SIZE :]) == protocol.Commit(
        1234, operations
    )


def test_a_publish_reply_needs_one_message_per_queue() -> None:
    with pytest.raises(protocol.EncodeError, match="one message id per queue"):
        protocol.encode(1, protocol.PublishReply((1, 2), (3,)))
