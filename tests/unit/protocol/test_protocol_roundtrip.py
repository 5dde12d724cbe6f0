"""Every frame survives encode -> Decoder.feed (in any chunking) -> parse."""

from __future__ import annotations

import doctest
import itertools
import math
from datetime import UTC, datetime

import protocol_strategies as strategies
from hypothesis import example, given, settings
from hypothesis import strategies as st

from courier import models, protocol
from courier.protocol import constants, decoder

Frame = strategies.Frame


def round_trip(
    message: protocol.Request | protocol.Reply, opcode: int | None = None
) -> protocol.Request | protocol.Reply:
    (raw,) = protocol.Decoder().feed(protocol.encode(1, message, opcode=opcode))
    return protocol.parse(raw)


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(data), *(cut % (len(data) + 1) for cut in cuts)})
    return [data[start:end] for start, end in itertools.pairwise(points)]


@settings(max_examples=300)
@given(
    frames=st.lists(strategies.frames(), min_size=1, max_size=8),
    cuts=st.lists(st.integers(min_value=0), max_size=20),
)
def test_frames_survive_any_chunking(frames: list[Frame], cuts: list[int]) -> None:
    stream = b"".join(protocol.encode(rid, message, opcode=op) for rid, message, op in frames)
    receiver = protocol.Decoder()
    received = [raw for chunk in split(stream, cuts) for raw in receiver.feed(chunk)]
    assert receiver.buffered == 0
    assert [raw.request_id for raw in received] == [rid for rid, _, _ in frames]
    assert [protocol.parse(raw) for raw in received] == [message for _, message, _ in frames]
    assert sum(raw.size for raw in received) == len(stream)


@given(frame=strategies.frames())
def test_header_fields_follow_the_message(frame: Frame) -> None:
    request_id, message, opcode = frame
    (raw,) = protocol.Decoder().feed(protocol.encode(request_id, message, opcode=opcode))
    assert raw.version == protocol.VERSION
    assert raw.is_response is protocol.is_reply(message)
    if protocol.is_request(message):
        assert raw.opcode == protocol.opcode_of(message)
    else:
        assert raw.opcode == opcode


@given(request=strategies.requests)
def test_every_request_prefix_is_incomplete_not_an_error(request: protocol.Request) -> None:
    data = protocol.encode(1, request)
    for end in range(len(data)):
        assert protocol.Decoder().feed(data[:end]) == []
    receiver = protocol.Decoder()
    assert receiver.feed(data[:-1]) == []
    assert len(receiver.feed(data[-1:])) == 1


def test_feeding_one_byte_at_a_time_yields_each_frame_once_complete() -> None:
    sent: list[protocol.Request] = [
        protocol.Ping(),
        protocol.CreateQueue(name="jobs"),
        protocol.Logout(),
    ]
    stream = b"".join(protocol.encode(rid, message) for rid, message in enumerate(sent))
    receiver = protocol.Decoder()
    completed_at = []
    for position in range(len(stream)):
        if receiver.feed(stream[position : position + 1]):
            completed_at.append(position + 1)
    assert completed_at == [12, 12 + 12 + 6, 12 + 12 + 6 + 12]


@given(body=st.binary(max_size=4096))
@example(body=b"")
@example(body=b"\x00")
@example(body=b"\xff\xfe\xc3(")  # never valid UTF-8
@example(body="ë".encode("utf-16"))
def test_bodies_are_bytes_and_round_trip_exactly(body: bytes) -> None:
    send = protocol.Send(queue_ids=(1,), body=body, receiver=None, priority=5, context=None)
    created_at = datetime(2024, 1, 1, tzinfo=UTC)
    message = models.Message(1, 1, 1, None, None, 5, created_at, body)
    reply = protocol.MessageReply(message=message)
    decoded_send = round_trip(send)
    decoded_reply = round_trip(reply, protocol.Opcode.RECEIVE)
    assert isinstance(decoded_send, protocol.Send)
    assert isinstance(decoded_reply, protocol.MessageReply)
    assert type(decoded_send.body) is bytes
    assert decoded_send.body == body
    assert decoded_reply.message.body == body


def test_absent_optionals_travel_as_zero_and_come_back_as_none() -> None:
    send = protocol.Send(queue_ids=(1,), body=b"x", receiver=None, priority=5, context=None)
    data = protocol.encode(1, send)
    # delay_ms 0, ttl_ms none, dedup_id none, no properties, then persistent (1)
    assert data.endswith(bytes(4 + 4 + 2 + 2) + b"\x01")
    assert round_trip(send) == send
    nack = protocol.Nack(delivery_id=3)
    assert protocol.encode(1, nack).endswith(bytes(4 + 2))
    assert round_trip(nack) == nack


def test_queue_settings_reply_needs_no_opcode() -> None:
    reply = protocol.QueueSettingsReply(settings=models.QueueSettings(queue=4))
    data = protocol.encode(2, reply)
    assert data[1] == protocol.Opcode.CONFIGURE_QUEUE
    assert round_trip(reply) == reply


def test_only_ping_register_and_the_logins_come_before_login() -> None:
    opcodes = protocol.Opcode
    logins = {opcodes.LOGIN, opcodes.LOGIN_START, opcodes.LOGIN_PROOF}
    assert {opcodes.PING, opcodes.REGISTER, *logins} == protocol.PRE_LOGIN_OPCODES


def test_codec_does_not_range_check_priority() -> None:
    for priority in (0, 11, 255):
        send = protocol.Send(
            queue_ids=(1,), body=b"x", receiver=None, priority=priority, context=None
        )
        assert round_trip(send) == send


def test_a_body_at_the_default_frame_limit_passes() -> None:
    # queue count, one queue id, receiver, priority, context, body length, delay, ttl, dedup,
    # properties, persistent
    overhead = 2 + 8 + 8 + 1 + 1 + 4 + 4 + 4 + 2 + 2 + 1
    body = b"a" * (constants.MAX_FRAME_BYTES - constants.HEADER_SIZE - overhead)
    send = protocol.Send(queue_ids=(1,), body=body, receiver=None, priority=5, context=None)
    data = protocol.encode(1, send)
    assert len(data) == protocol.MAX_FRAME_BYTES
    (raw,) = protocol.Decoder().feed(data)
    assert protocol.parse(raw) == send


def test_read_only_client_round_trips_in_a_reply() -> None:
    client = models.ClientInfo(id=9, name="observer", mode=models.ClientMode.READ_ONLY)
    reply = protocol.ClientReply(client=client)
    (raw,) = protocol.Decoder().feed(protocol.encode(4, reply, opcode=protocol.Opcode.LOGIN))
    assert protocol.parse(raw) == reply


def test_module_examples() -> None:
    for module in (constants, decoder):
        result = doctest.testmod(module)
        assert result.attempted > 0
        assert result.failed == 0


def test_every_property_type_keeps_its_type_through_the_wire() -> None:
    # dict equality cannot tell True from 1 or 1.0 from 1: compare the types too
    properties = {"t": "x", "i": 1, "f": 1.0, "b": True, "zero": 0, "no": False, "neg": -0.0}
    send = protocol.Send((1,), b"x", None, 5, None, properties=properties)
    (raw,) = protocol.Decoder().feed(protocol.encode(1, send))
    parsed = protocol.parse(raw)
    assert isinstance(parsed, protocol.Send)
    assert [(k, type(v), v) for k, v in parsed.properties.items()] == [
        (k, type(v), v) for k, v in properties.items()
    ]
    assert math.copysign(1.0, parsed.properties["neg"]) == -1.0  # type: ignore[arg-type]
