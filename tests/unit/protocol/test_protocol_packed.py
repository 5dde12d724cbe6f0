"""The one-struct layouts of the hot SEND and READ agree, byte for byte and frame for
frame, with the field-by-field ones they shortcut; anything else takes the latter."""

from __future__ import annotations

import protocol_strategies as strategies
from hypothesis import given
from hypothesis import strategies as st

from courier import models, protocol
from courier.protocol import constants, exceptions, requests, wire
from courier.protocol.constants import Opcode

plain_sends = st.builds(
    protocol.Send,
    queue_ids=strategies.ids.map(lambda queue_id: (queue_id,)),
    body=strategies.bodies,
    receiver=strategies.optional_ids,
    priority=strategies.u8s,
    context=st.none(),
    delay_ms=strategies.u32s,
    ttl_ms=strategies.optional_u32s,
    persistent=st.booleans(),
)
plain_reads = st.builds(
    protocol.Read,
    queue_id=strategies.optional_ids,
    sender_id=strategies.optional_ids,
    order=strategies.orders,
    pop=st.booleans(),
    lease_ms=strategies.u32s,
)


def checked_body(opcode: int, request: protocol.Send | protocol.Read) -> bytes:
    writer = wire.Writer(opcode)
    if isinstance(request, protocol.Send):
        requests.write_send_checked(writer, request)
    else:
        requests.write_read_checked(writer, request)
    return bytes(writer.buffer)


def written_body(opcode: int, request: protocol.Send | protocol.Read) -> bytes:
    writer = wire.Writer(opcode)
    requests.write_request(writer, request)
    return bytes(writer.buffer)


@given(send=plain_sends)
def test_a_plain_send_is_packed_as_the_checked_writer_writes_it(send: protocol.Send) -> None:
    assert requests.is_plain_send(send)
    assert requests.write_send_packed(wire.Writer(Opcode.SEND), send)
    assert written_body(Opcode.SEND, send) == checked_body(Opcode.SEND, send)


@given(read=plain_reads)
def test_a_read_without_selector_is_packed_as_the_checked_writer_writes_it(
    read: protocol.Read,
) -> None:
    assert requests.write_read_packed(wire.Writer(Opcode.READ), read)
    assert written_body(Opcode.READ, read) == checked_body(Opcode.READ, read)


@given(send=plain_sends)
def test_the_packed_send_reader_agrees_with_the_checked_one(send: protocol.Send) -> None:
    body = checked_body(Opcode.SEND, send)[constants.HEADER_SIZE :]
    packed = requests.read_send_packed(wire.Reader(Opcode.SEND, body))
    assert packed == requests.read_send_checked(wire.Reader(Opcode.SEND, body)) == send


@given(read=plain_reads)
def test_the_packed_read_reader_agrees_with_the_checked_one(read: protocol.Read) -> None:
    body = checked_body(Opcode.READ, read)[constants.HEADER_SIZE :]
    packed = requests.read_read_packed(wire.Reader(Opcode.READ, body))
    assert packed == requests.read_read_checked(wire.Reader(Opcode.READ, body)) == read


@given(send=strategies.sends)
def test_any_other_send_round_trips_through_the_checked_layout(send: protocol.Send) -> None:
    (raw,) = protocol.Decoder().feed(protocol.encode(3, send))
    assert protocol.parse(raw) == send


def test_sends_off_the_packed_layout_are_read_by_the_checked_reader() -> None:
    others = [
        protocol.Send((1, 2), b"two queues", None, 5, None),
        protocol.Send((1,), b"with context", None, 5, 77),
        protocol.Send((1,), b"dedup", None, 5, None, dedup_id="once"),
        protocol.Send((1,), b"props", None, 5, None, properties={"kind": "order"}),
    ]
    for send in others:
        body = written_body(Opcode.SEND, send)[constants.HEADER_SIZE :]
        assert requests.read_send_packed(wire.Reader(Opcode.SEND, body)) is None
        assert requests.read_send(wire.Reader(Opcode.SEND, body)) == send


def test_a_read_with_a_selector_is_read_by_the_checked_reader() -> None:
    read = protocol.Read(1, None, models.Order.TIME, True, 0, "kind = 'order'")
    body = written_body(Opcode.READ, read)[constants.HEADER_SIZE :]
    assert requests.read_read_packed(wire.Reader(Opcode.READ, body)) is None
    assert requests.read_read(wire.Reader(Opcode.READ, body)) == read


def test_a_send_field_out_of_range_is_named_by_the_checked_writer() -> None:
    too_big = protocol.Send((1,), b"x", None, 256, None)
    negative_delay = protocol.Send((1,), b"x", None, 5, None, delay_ms=-1)
    for send, field in ((too_big, "priority"), (negative_delay, "delay_ms")):
        try:
            protocol.encode(1, send)
        except exceptions.EncodeError as exc:
            assert field in str(exc)
        else:
            raise AssertionError(f"{send} was encoded")


def test_a_bad_boolean_or_order_in_a_packed_read_gets_the_checked_readers_error() -> None:
    good = written_body(Opcode.READ, protocol.Read(1, None, models.Order.TIME, True))
    body = bytearray(good[constants.HEADER_SIZE :])
    for offset, value, words in ((16, 9, "order"), (17, 2, "pop")):
        bad = bytearray(body)
        bad[offset] = value
        assert requests.read_read_packed(wire.Reader(Opcode.READ, bytes(bad))) is None
        try:
            requests.read_read(wire.Reader(Opcode.READ, bytes(bad)))
        except exceptions.MalformedBody as exc:
            assert words in str(exc)
        else:
            raise AssertionError(f"{bytes(bad)!r} was read")
