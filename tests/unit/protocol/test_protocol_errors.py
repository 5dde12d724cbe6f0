"""Bad bytes and bad values give precise ProtocolError subclasses, never anything else."""

from __future__ import annotations

import contextlib
import math
import struct
from datetime import UTC, datetime
from typing import Any

import protocol_strategies as strategies
import pytest
from hypothesis import given
from hypothesis import strategies as st

from courier import errors, models, protocol
from courier.protocol import constants

HEADER = struct.Struct(">BBHII")  # version, opcode, flags, request_id, body_length


def frame(body: bytes, opcode: int, *, flags: int = 0, request_id: int = 1) -> bytes:
    return HEADER.pack(1, opcode, flags, request_id, len(body)) + body


def parse_one(data: bytes) -> protocol.Request | protocol.Reply:
    (raw,) = protocol.Decoder().feed(data)
    return protocol.parse(raw)


def decode_everything(data: bytes) -> None:
    """Run the whole receive path; only ProtocolError may escape."""
    receiver = protocol.Decoder()
    try:
        raws = receiver.feed(data)
    except errors.ProtocolError:
        return
    for raw in raws:
        with contextlib.suppress(protocol.UnknownOpcode, protocol.MalformedBody):
            protocol.parse(raw)


# --- fuzzing -----------------------------------------------------------------------


@given(data=st.binary(max_size=200))
def test_random_bytes_raise_only_protocol_errors(data: bytes) -> None:
    decode_everything(data)


@given(
    opcode=st.integers(0, 255),
    flags=st.integers(0, 0xFFFF),
    body=st.binary(max_size=80),
)
def test_random_bodies_behind_valid_headers_raise_only_protocol_errors(
    opcode: int, flags: int, body: bytes
) -> None:
    decode_everything(frame(body, opcode, flags=flags))


@given(frame_=strategies.frames(), position=st.integers(0), value=st.integers(0, 255))
def test_corrupted_frames_raise_only_protocol_errors(
    frame_: strategies.Frame, position: int, value: int
) -> None:
    request_id, message, opcode = frame_
    data = bytearray(protocol.encode(request_id, message, opcode=opcode))
    data[position % len(data)] = value
    decode_everything(bytes(data))


@given(frame_=strategies.frames(), cut=st.integers(1))
def test_truncated_bodies_are_malformed(frame_: strategies.Frame, cut: int) -> None:
    request_id, message, opcode = frame_
    (raw,) = protocol.Decoder().feed(protocol.encode(request_id, message, opcode=opcode))
    if not raw.body:
        return
    body = raw.body[: cut % len(raw.body)]  # strictly shorter
    short = protocol.RawFrame(raw.version, raw.opcode, raw.flags, raw.request_id, body)
    with pytest.raises(protocol.MalformedBody):
        protocol.parse(short)


@given(frame_=strategies.frames(), extra=st.binary(min_size=1, max_size=9))
def test_trailing_bytes_are_malformed(frame_: strategies.Frame, extra: bytes) -> None:
    request_id, message, opcode = frame_
    (raw,) = protocol.Decoder().feed(protocol.encode(request_id, message, opcode=opcode))
    longer = protocol.RawFrame(raw.version, raw.opcode, raw.flags, raw.request_id, raw.body + extra)
    with pytest.raises(protocol.MalformedBody, match=f"{len(extra)} trailing bytes"):
        protocol.parse(longer)


# --- framing errors: the connection is beyond repair ---------------------------------


def test_unsupported_version_carries_the_version() -> None:
    data = HEADER.pack(2, protocol.Opcode.PING, 0, 1, 0)
    with pytest.raises(protocol.UnsupportedVersion) as caught:
        protocol.Decoder().feed(data)
    assert caught.value.version == 2
    assert "version 2" in str(caught.value)
    assert isinstance(caught.value, errors.ProtocolError)


def test_version_is_checked_on_the_first_byte() -> None:
    with pytest.raises(protocol.UnsupportedVersion) as caught:
        protocol.Decoder().feed(b"G")  # e.g. an HTTP client: "GET / ..."
    assert caught.value.version == ord("G")


def test_a_decoder_that_saw_a_bad_header_keeps_failing() -> None:
    receiver = protocol.Decoder()
    good = protocol.encode(1, protocol.Ping())
    with pytest.raises(protocol.UnsupportedVersion):
        receiver.feed(good + b"\x09" + good)
    with pytest.raises(protocol.UnsupportedVersion):
        receiver.feed(good)
    with pytest.raises(protocol.UnsupportedVersion):
        receiver.feed(b"")


def test_frame_too_large_carries_size_and_limit() -> None:
    receiver = protocol.Decoder(max_frame_bytes=100)
    with pytest.raises(protocol.FrameTooLarge) as caught:
        receiver.feed(HEADER.pack(1, protocol.Opcode.SEND, 0, 1, 89))  # header only
    assert (caught.value.size, caught.value.limit) == (101, 100)
    assert "101" in str(caught.value)
    assert "100" in str(caught.value)
    assert isinstance(caught.value, protocol.FramingError)
    with pytest.raises(protocol.FrameTooLarge):
        receiver.feed(protocol.encode(2, protocol.Ping()))


def test_a_frame_exactly_at_the_limit_is_accepted() -> None:
    data = frame(b"\x00" * 88, protocol.Opcode.PING)
    (raw,) = protocol.Decoder(max_frame_bytes=100).feed(data)
    assert raw.size == 100


def test_default_limit_is_one_mebibyte_of_body() -> None:
    assert protocol.MAX_FRAME_BYTES == 12 + 1024 * 1024
    assert protocol.HEADER_SIZE == 12
    with pytest.raises(protocol.FrameTooLarge):
        protocol.Decoder().feed(HEADER.pack(1, 0x20, 0, 1, 1024 * 1024 + 1))


def test_frame_limit_for_leaves_room_for_oversized_bodies() -> None:
    assert protocol.frame_limit_for(64 * 1024) == 12 + 128 * 1024 + 64 * 1024
    limit = protocol.frame_limit_for(2 * 1024 * 1024)
    assert limit == 12 + 4 * 1024 * 1024 + 64 * 1024


# --- frame errors: one frame is bad, the stream is fine ------------------------------


def test_unknown_request_opcode_keeps_the_stream_usable() -> None:
    receiver = protocol.Decoder()
    raws = receiver.feed(frame(b"abc", 0x7F, request_id=5) + protocol.encode(6, protocol.Ping()))
    with pytest.raises(protocol.UnknownOpcode) as caught:
        protocol.parse(raws[0])
    assert caught.value.opcode == 0x7F
    assert "0x7f" in str(caught.value)
    assert raws[0].request_id == 5
    assert protocol.parse(raws[1]) == protocol.Ping()


def test_opcode_zero_is_not_a_request() -> None:
    with pytest.raises(protocol.UnknownOpcode):
        parse_one(frame(b"", 0))


def test_successful_reply_to_an_unknown_opcode_is_unknown() -> None:
    with pytest.raises(protocol.UnknownOpcode):
        parse_one(frame(b"\x00", 0x7F, flags=1))


def test_error_reply_parses_whatever_the_opcode() -> None:
    reply = protocol.ErrorReply(status=errors.Status.BAD_REQUEST, message="unknown opcode 0x7f")
    data = protocol.encode(5, reply, opcode=0x7F)
    assert data[1] == 0x7F
    assert parse_one(data) == reply


def test_error_reply_without_opcode_is_about_the_connection() -> None:
    reply = protocol.ErrorReply(status=errors.Status.BAD_REQUEST, message="bad version")
    data = protocol.encode(0, reply)
    assert data[1] == protocol.NO_OPCODE
    assert parse_one(data) == reply


def test_bad_utf8_is_malformed() -> None:
    with pytest.raises(protocol.MalformedBody) as caught:
        parse_one(frame(b"\x00\x02\xff\xfe", protocol.Opcode.CREATE_QUEUE))
    assert caught.value.opcode == protocol.Opcode.CREATE_QUEUE
    assert "UTF-8" in caught.value.reason
    assert "CREATE_QUEUE" in str(caught.value)


@pytest.mark.parametrize(
    ("opcode", "flags", "body", "field"),
    [
        (protocol.Opcode.REGISTER, 0, b"\x00\x01a\x03\x00", "mode"),
        (protocol.Opcode.READ, 0, bytes(16) + b"\x07\x00", "order"),
        (protocol.Opcode.READ, 0, bytes(16) + b"\x00\x02", "pop"),
        (protocol.Opcode.LOGIN, 0, b"\x03", "lookup"),
        (protocol.Opcode.GET_CLIENT, 0, b"\x00", "lookup"),  # neither id nor name
        (protocol.Opcode.PING, 1, b"\x63", "status"),
        (protocol.Opcode.REGISTER, 1, b"\x00" + bytes(8) + b"\x00\x01a\x05\x00", "client.mode"),
    ],
)
def test_unknown_enum_codes_are_malformed(opcode: int, flags: int, body: bytes, field: str) -> None:
    with pytest.raises(protocol.MalformedBody) as caught:
        parse_one(frame(body, opcode, flags=flags))
    assert caught.value.opcode == opcode
    assert caught.value.reason.startswith(field)


def test_trailing_bytes_name_their_count() -> None:
    with pytest.raises(protocol.MalformedBody) as caught:
        parse_one(frame(b"\x00\x00", protocol.Opcode.LOGOUT))
    assert caught.value.reason == "2 trailing bytes after the body"


def test_a_count_larger_than_the_body_is_malformed() -> None:
    body = b"\xff\xff" + bytes(8)  # claims 65535 queue ids, carries one
    with pytest.raises(protocol.MalformedBody, match="ends inside"):
        parse_one(frame(body, protocol.Opcode.SEND))


SEND = protocol.Send((1,), b"x", None, 5, None, delay_ms=1, ttl_ms=2, dedup_id="abc")
SEND_PROPERTIES = protocol.Send((1,), b"x", None, 5, None, properties={"k": "vv"})
PUBLISH = protocol.Publish(3, None, b"x", None, 5, None, persistent=False)
SEND_MANY = protocol.SendMany((1,), (models.Draft(b"x", persistent=False),))
NACK = protocol.Nack(delivery_id=1, delay_ms=2, reason="why")
SETTINGS = protocol.QueueSettingsReply(models.QueueSettings(1, 3, 2, dead_letter_expired=True))
LEASED = protocol.MessageReply(
    models.Message(1, 1, 1, None, None, 5, datetime.now(UTC), b"x", 2, 1, 3, "oops")
)
LEASED_PROPERTIES = protocol.MessageReply(
    models.Message(1, 1, 1, None, None, 5, datetime.now(UTC), b"x", properties={"k": "vv"})
)


@pytest.mark.parametrize(
    ("message", "opcode", "cut", "field"),
    [
        (SEND, None, 1, "persistent"),
        (SEND, None, 3, "len(properties)"),
        (SEND, None, 4, "dedup_id"),
        (SEND, None, 8, "len(dedup_id)"),
        (SEND, None, 9, "ttl_ms"),
        (SEND, None, 13, "delay_ms"),
        (SEND_PROPERTIES, None, 2, "properties['k']"),
        (SEND_PROPERTIES, None, 4, "len(properties['k'])"),
        (SEND_PROPERTIES, None, 6, "properties['k'] type"),
        (SEND_PROPERTIES, None, 7, "properties key"),
        (SEND_PROPERTIES, None, 8, "len(properties key)"),
        (PUBLISH, None, 1, "persistent"),
        (SEND_MANY, None, 1, "persistent"),
        (protocol.Read(None, None, models.Order.TIME, True, 5), None, 1, "len(selector)"),
        (protocol.Read(None, None, models.Order.TIME, True, 5), None, 3, "lease_ms"),
        (protocol.Read(None, None, models.Order.TIME, True, 5, "k = 1"), None, 1, "selector"),
        (protocol.Receive(1, None, models.Order.TIME, 0, 5), None, 2, "len(selector)"),
        (protocol.Receive(1, None, models.Order.TIME, 0, 5), None, 6, "lease_ms"),
        (protocol.Receive(1, None, models.Order.TIME, 0, 5), None, 7, "timeout_ms"),
        (protocol.ReceiveMany(1, None, models.Order.TIME, 5), None, 1, "len(selector)"),
        (protocol.Cancel(request_id=7), None, 1, "request_id"),
        (protocol.ConfigureQueue(1, 3, 2, True), None, 1, "overflow"),
        (protocol.ConfigureQueue(1, 3, 2, True), None, 2, "max_bytes presence"),
        (protocol.ConfigureQueue(1, 3, 2, True, max_bytes=9), None, 2, "max_bytes"),
        (protocol.ConfigureQueue(1, 3, 2, True), None, 3, "max_messages"),
        (protocol.ConfigureQueue(1, 3, 2, True), None, 7, "dead_letter_expired"),
        (protocol.ConfigureQueue(1, 3, 2, True), None, 8, "dead_letter_queue"),
        (protocol.ConfigureQueue(1, 3, 2, True), None, 16, "max_deliveries"),
        (protocol.Ack(delivery_id=1), None, 1, "delivery_id"),
        (NACK, None, 1, "reason"),
        (NACK, None, 5, "len(reason)"),
        (NACK, None, 6, "delay_ms"),
        (protocol.Extend(delivery_id=1, lease_ms=5), None, 1, "lease_ms"),
        (SETTINGS, None, 1, "settings.overflow"),
        (SETTINGS, None, 2, "settings.max_bytes presence"),
        (SETTINGS, None, 3, "settings.max_messages"),
        (SETTINGS, None, 7, "settings.dead_letter_expired"),
        (SETTINGS, None, 15, "settings.dead_letter_queue"),
        (SETTINGS, None, 16, "settings.max_deliveries"),
        (LEASED, protocol.Opcode.READ, 1, "len(message.properties)"),
        (LEASED, protocol.Opcode.READ, 3, "message.failure"),
        (LEASED, protocol.Opcode.READ, 8, "len(message.failure)"),
        (LEASED, protocol.Opcode.READ, 9, "message.dead_from"),
        (LEASED, protocol.Opcode.READ, 17, "message.deliveries"),
        (LEASED, protocol.Opcode.READ, 21, "message.delivery"),
        (LEASED_PROPERTIES, protocol.Opcode.READ, 1, "message.properties['k']"),
        (LEASED_PROPERTIES, protocol.Opcode.READ, 5, "message.properties['k'] type"),
        (LEASED_PROPERTIES, protocol.Opcode.READ, 9, "len(message.properties)"),
    ],
)
def test_truncated_new_fields_are_malformed(
    message: protocol.Request | protocol.Reply, opcode: int | None, cut: int, field: str
) -> None:
    (raw,) = protocol.Decoder().feed(protocol.encode(1, message, opcode=opcode))
    short = protocol.RawFrame(raw.version, raw.opcode, raw.flags, raw.request_id, raw.body[:-cut])
    with pytest.raises(protocol.MalformedBody) as caught:
        protocol.parse(short)
    assert f"ends inside {field} (" in caught.value.reason


def test_a_send_in_the_old_layout_is_malformed_not_misread() -> None:
    """Before delay_ms, ttl_ms and dedup_id a SEND ended with its body."""
    old = b"\x00\x01" + struct.pack(">q", 7) + bytes(8) + b"\x05\x00" + b"\x00\x00\x00\x02hi"
    with pytest.raises(protocol.MalformedBody, match="ends inside delay_ms"):
        parse_one(frame(old, protocol.Opcode.SEND))


def test_a_send_of_revision_2_without_persistence_is_malformed_not_misread() -> None:
    """Revision 2 ended a SEND with its properties; revision 3 adds ``persistent``."""
    body = protocol.encode(1, protocol.Send((7,), b"hi", None, 5, None))[12:-1]
    with pytest.raises(protocol.MalformedBody, match="ends inside persistent"):
        parse_one(frame(body, protocol.Opcode.SEND))


def test_a_persistence_flag_other_than_0_or_1_is_malformed() -> None:
    body = protocol.encode(1, protocol.Send((7,), b"hi", None, 5, None))[12:-1] + b"\x02"
    with pytest.raises(protocol.MalformedBody, match="persistent is 2"):
        parse_one(frame(body, protocol.Opcode.SEND))


def test_a_timestamp_beyond_datetime_is_malformed() -> None:
    message = bytes(8 * 4) + b"\x00\x05" + struct.pack(">q", 2**63 - 1) + bytes(4)
    with pytest.raises(protocol.MalformedBody, match="created_at"):
        parse_one(frame(b"\x00" + message, protocol.Opcode.READ, flags=1))


# --- replies to exceptions -------------------------------------------------------------


@pytest.mark.parametrize("status", [s for s in errors.Status if s is not errors.Status.OK])
def test_error_reply_becomes_the_status_exception(status: errors.Status) -> None:
    exception = protocol.ErrorReply(status=status, message="it failed").to_exception()
    assert exception.status is status
    assert exception.message == "it failed"


def test_long_error_messages_are_cut_at_a_character_boundary() -> None:
    reply = protocol.ErrorReply(status=errors.Status.QUEUE_NOT_FOUND, message="é" * 40_000)
    decoded = parse_one(protocol.encode(1, reply, opcode=protocol.Opcode.GET_QUEUE))
    assert isinstance(decoded, protocol.ErrorReply)
    assert decoded.message == "é" * (65535 // 2)


# --- values that cannot be encoded ----------------------------------------------------

NAIVE = datetime(2024, 1, 1)  # deliberately without a timezone
TEXT: Any = "x"  # a str where bytes belong, as code written for str bodies would pass


@pytest.mark.parametrize(
    ("request_id", "message", "opcode", "reason"),
    [
        (1, protocol.Login(client_id=None, name=None), None, "exactly one"),
        (1, protocol.Login(client_id=3, name="x"), None, "exactly one"),
        (1, protocol.GetQueue(queue_id=None, name=None), None, "exactly one"),
        (1, protocol.GetClient(client_id=None, name=None), None, "exactly one"),
        (1, protocol.GetClient(client_id=7, name="bob"), None, "exactly one"),
        (1, protocol.Send((1,), b"x", None, 256, None), None, "priority"),
        (1, protocol.Send((1,), b"x", 0, 5, None), None, "receiver"),
        (1, protocol.Send(tuple(range(1, 65537)), b"x", None, 5, None), None, "len(queue_ids)"),
        (1, protocol.Receive(1, None, models.Order.TIME, -1), None, "timeout_ms"),
        (1, protocol.Send((1,), TEXT, None, 5, None), None, "body must be bytes"),
        (1, protocol.Send((1,), b"x", None, 5, None, ttl_ms=0), None, "ttl_ms=0 must be positive"),
        (1, protocol.Send((1,), b"x", None, 5, None, ttl_ms=2**32), None, "ttl_ms"),
        (1, protocol.Send((1,), b"x", None, 5, None, dedup_id=""), None, "dedup_id is empty"),
        (1, protocol.Send((1,), b"x", None, 5, None, delay_ms=-1), None, "delay_ms"),
        (1, protocol.Send((1,), b"x", None, 5, None, delay_ms=2**32), None, "delay_ms"),
        (1, protocol.Read(None, None, models.Order.TIME, True, -1), None, "lease_ms"),
        (1, protocol.Receive(1, None, models.Order.TIME, 0, 2**32), None, "lease_ms"),
        (1, protocol.Cancel(-1), None, "request_id"),
        (1, protocol.Cancel(2**32), None, "request_id"),
        (1, protocol.ConfigureQueue(1, 0, None, False), None, "max_deliveries=0"),
        (1, protocol.ConfigureQueue(1, 2**32, None, False), None, "max_deliveries"),
        (1, protocol.ConfigureQueue(1, None, 0, False), None, "dead_letter_queue"),
        (1, protocol.Ack(2**63), None, "delivery_id"),
        (1, protocol.Nack(1, delay_ms=-1), None, "delay_ms"),
        (1, protocol.Nack(1, reason=""), None, "reason is empty"),
        (1, protocol.Extend(1, 2**32), None, "lease_ms"),
        (1, protocol.QueueSettingsReply(models.QueueSettings(1, 0)), None, "max_deliveries=0"),
        (1, protocol.Register("n", "superuser"), None, "mode"),  # type: ignore[arg-type]
        (1, protocol.CreateQueue("q" * 65536), None, "len(name)"),
        (1, protocol.CreateQueue("\ud800"), None, "name"),
        (2**32, protocol.Ping(), None, "request_id"),
        (1, protocol.Ping(), protocol.Opcode.LOGOUT, "PING"),
        (1, protocol.Done(), None, "opcode="),
        (1, protocol.QueueReply(models.Queue(1, "q")), protocol.Opcode.PING, "does not answer"),
        (1, protocol.ErrorReply(errors.Status.OK, "fine"), None, "not an error status"),
        (1, "not a frame", None, "not a frame type"),
    ],
)
def test_unencodable_values_raise_encode_error(
    request_id: int, message: object, opcode: int | None, reason: str
) -> None:
    with pytest.raises(protocol.EncodeError) as caught:
        protocol.encode(request_id, message, opcode=opcode)  # type: ignore[arg-type]
    assert reason in caught.value.reason
    assert isinstance(caught.value, errors.ProtocolError)


AT = datetime(2024, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (models.Message(1, 1, 1, None, None, 5, AT, TEXT), "message.body must be bytes"),
        (models.Message(1, 1, 1, None, None, 5, AT, b"", delivery=0), "message.delivery"),
        (models.Message(1, 1, 1, None, None, 5, AT, b"", deliveries=-1), "message.deliveries"),
        (models.Message(1, 1, 1, None, None, 5, AT, b"", dead_from=-7), "message.dead_from"),
        (models.Message(1, 1, 1, None, None, 5, AT, b"", failure=""), "message.failure is empty"),
    ],
)
def test_unencodable_messages_raise_encode_error(message: models.Message, reason: str) -> None:
    with pytest.raises(protocol.EncodeError) as caught:
        protocol.encode(1, protocol.MessageReply(message), opcode=protocol.Opcode.READ)
    assert reason in caught.value.reason


def test_naive_timestamps_cannot_be_encoded() -> None:
    message = models.Message(1, 1, 1, None, None, 5, NAIVE, b"x")
    with pytest.raises(protocol.EncodeError, match="timezone-aware"):
        protocol.encode(1, protocol.MessageReply(message), opcode=protocol.Opcode.READ)


def send_with(properties: bytes) -> bytes:
    """A SEND whose properties are written by hand, past the encoder's checks."""
    encoded = protocol.encode(1, protocol.Send((1,), b"x", None, 5, None))
    body = encoded[constants.HEADER_SIZE : -3] + properties + b"\x01"  # then persistent
    header = constants.HEADER.pack(1, protocol.Opcode.SEND, 0, 1, len(body))
    return header + body


def entry(key: bytes, value: bytes) -> bytes:
    """A text property: key, tag t, value."""
    return len(key).to_bytes(2, "big") + key + b"t" + len(value).to_bytes(2, "big") + value


def typed_entry(key: bytes, tag: int, value: bytes) -> bytes:
    return len(key).to_bytes(2, "big") + key + bytes([tag]) + value


@pytest.mark.parametrize(
    ("properties", "reason"),
    [
        ((65).to_bytes(2, "big"), "65 properties; at most 64"),
        ((1).to_bytes(2, "big") + entry(b"", b"v"), "a key is 1 to 255 bytes"),
        ((1).to_bytes(2, "big") + entry(b"k" * 256, b"v"), "a key is 1 to 255 bytes"),
        ((1).to_bytes(2, "big") + entry(b"k", b"v" * 4097), "4097 bytes; at most 4096"),
        ((2).to_bytes(2, "big") + entry(b"k", b"a") + entry(b"k", b"b"), "'k' is given twice"),
        ((1).to_bytes(2, "big") + entry(b"k", b"\xff"), "not valid UTF-8"),
        ((1).to_bytes(2, "big") + entry(b"k", b"a\x00b"), "holds a NUL character"),
        ((1).to_bytes(2, "big") + typed_entry(b"k", 0, b""), "type 0x00 is unknown"),
        ((1).to_bytes(2, "big") + typed_entry(b"k", 1, b"\x00"), "type 0x01 is unknown"),
        ((1).to_bytes(2, "big") + typed_entry(b"k", ord("b"), b"\x02"), "a boolean must be 0 or 1"),
        (
            (1).to_bytes(2, "big") + typed_entry(b"k", ord("f"), struct.pack(">d", math.nan)),
            "is not finite",
        ),
        (
            (1).to_bytes(2, "big") + typed_entry(b"k", ord("f"), struct.pack(">d", -math.inf)),
            "is not finite",
        ),
        (
            (4).to_bytes(2, "big") + b"".join(entry(b"k%d" % n, b"v" * 4095) for n in range(4)),
            "the properties are 16388 bytes; a message carries at most 16384",
        ),
    ],
)
def test_properties_beyond_the_limits_are_malformed(properties: bytes, reason: str) -> None:
    (raw,) = protocol.Decoder().feed(send_with(properties))
    with pytest.raises(protocol.MalformedBody) as caught:
        protocol.parse(raw)
    assert reason in caught.value.reason


def test_properties_at_the_limits_pass() -> None:
    properties = {f"{n:02d}": "" for n in range(60)}  # 64 in all, 16384 bytes
    properties |= {key * 255: "v" * 4096 for key in "kji"} | {"h" * 255: "v" * 2956}
    assert (len(properties), protocol.properties_size(properties)) == (64, 16384)
    send = protocol.Send((1,), b"x", None, 5, None, properties=properties)
    (raw,) = protocol.Decoder(max_frame_bytes=10**6).feed(protocol.encode(1, send))
    assert protocol.parse(raw) == send


@pytest.mark.parametrize(
    ("properties", "reason"),
    [
        ({f"k{n}": "v" for n in range(65)}, "65 properties"),
        ({"": "v"}, "property key 1 is empty"),
        ({"k" * 256: "v"}, "a key is 1 to 255 bytes"),
        ({"k": "v" * 4097}, "a value is at most 4096 bytes"),
        ({"k": None}, "a value is text, an integer, a float or a boolean, not NoneType"),
        ({"k": b"x"}, "a value is text, an integer, a float or a boolean, not bytes"),
        ({"k": 2**63}, "the integer 9223372036854775808 is outside the 64-bit range"),
        ({"k": -(2**63) - 1}, "outside the 64-bit range"),
        ({"k": math.inf}, "the float inf is not finite"),
        ({"k": math.nan}, "the float nan is not finite"),
        ({5: "v"}, "keys are text (str), not int"),
        ({"k": "\x00"}, "holds a NUL character"),
        ({f"k{n}": "v" * 4000 for n in range(5)}, "a message carries at most 16384"),
    ],
)
def test_the_encoder_refuses_properties_beyond_the_limits(
    properties: dict[object, object], reason: str
) -> None:
    with pytest.raises(protocol.EncodeError) as caught:
        protocol.encode(1, protocol.Send((1,), b"x", None, 5, None, properties=properties))
    assert reason in str(caught.value)


@pytest.mark.parametrize("size", [0, 2, 255, 256, 300, 4096])
def test_a_revision_3_property_is_refused_never_misread(size: int) -> None:
    # Revision 3 wrote a value as a name: its first byte, the high byte of a length
    # of at most 4096, is never a tag (tags are letters, above 0x10).
    old = len(b"k").to_bytes(2, "big") + b"k" + size.to_bytes(2, "big") + b"v" * size
    (raw,) = protocol.Decoder().feed(send_with((1).to_bytes(2, "big") + old))
    with pytest.raises(protocol.MalformedBody) as caught:
        protocol.parse(raw)
    assert "type 0x" in caught.value.reason and "is unknown" in caught.value.reason


def test_a_tag_never_reads_as_a_revision_3_length() -> None:
    # The other way round: a revision-3 reader takes the tag as a length's high byte,
    # and every tag makes a length beyond the 4096 it accepts.
    assert min(constants.PropertyType) << 8 > constants.MAX_PROPERTY_VALUE_BYTES
