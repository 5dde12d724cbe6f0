"""Numbers that define the Courier wire format: version, header layout, limits, opcodes.

docs/protocol.md is the specification; this module is its single source in code.
"""

from __future__ import annotations

import enum
import math
import struct
from collections.abc import Mapping

VERSION = 1
"""The only protocol version this code speaks; the first byte of every frame."""

HEADER = struct.Struct(">BBHII")
"""version u8, opcode u8, flags u16, request_id u32, body_length u32 (big-endian)."""

HEADER_SIZE = HEADER.size  # 12

FLAG_RESPONSE = 0x0001
"""Flags bit 0: set on every reply frame, clear on every request frame."""

MAX_MESSAGE_BODY_BYTES = 1024 * 1024
"""Largest message body the default frame limit leaves room for."""

MAX_FRAME_BYTES = HEADER_SIZE + MAX_MESSAGE_BODY_BYTES
"""Default limit on a whole frame (header + body) that a Decoder accepts.

Servers size their own limit from config so that a message body a little over the
message limit still arrives whole and can be answered with PAYLOAD_TOO_LARGE.
"""

SEND_OVERHEAD_BYTES = 64 * 1024
"""Room in a SEND frame for everything but the message body (queue ids, fields)."""

MAX_BATCH_MESSAGES = 1000
"""Messages (or deliveries) one SEND_MANY, RECEIVE_MANY, ACK_MANY or NACK_MANY may
carry; a count above it is refused before anything else of the frame is read."""

MAX_TRANSACTION_OPERATIONS = 1000
"""Operations one COMMIT may carry on the wire (servers take fewer by default)."""

TRANSACTION_OPERATIONS = frozenset({0x20, 0x36, 0x25})
"""What a COMMIT may carry: SEND, PUBLISH and ACK, each in its own request layout."""

BATCH_ITEM_OVERHEAD_BYTES = 128
"""Room per message of a SEND_MANY for its fields besides the body."""


def frame_limit_for(max_body_bytes: int, max_batch_bytes: int = 0) -> int:
    """A server's frame limit for its message-body and batch limits.

    Twice the larger limit plus room for the rest of a SEND or SEND_MANY: a body or
    a batch somewhat over its limit still arrives whole, so the server can answer
    PAYLOAD_TOO_LARGE instead of dropping the connection.

    >>> frame_limit_for(64 * 1024)  # the default body limit
    196620
    >>> frame_limit_for(64 * 1024, 1024 * 1024) - HEADER_SIZE  # and the default batch limit
    2290688
    """
    largest = max(max_body_bytes, max_batch_bytes)
    batch_fields = BATCH_ITEM_OVERHEAD_BYTES * MAX_BATCH_MESSAGES if max_batch_bytes else 0
    return HEADER_SIZE + 2 * largest + SEND_OVERHEAD_BYTES + batch_fields


MAX_REQUEST_ID = 0xFFFF_FFFF
PROBE_REQUEST_ID = 0
"""Clients number their requests from 1. A request with id 0 is a probe (a launcher's
readiness PING, say): it is answered like any other but left out of the measurement
records, since it is no part of any workload."""
MAX_NAME_BYTES = 0xFFFF
"""Queue and client names, and error messages, carry a u16 byte length."""

MAX_BLOB_BYTES = 0xFFFF_FFFF
"""Message bodies are raw bytes with a u32 length (the frame limit binds long before)."""

MAX_QUEUE_IDS = 0xFFFF
"""A SEND names its target queues with a u16 count."""

MAX_PROPERTIES = 64
"""Properties one message may carry (text keys to typed values)."""

MAX_PROPERTY_KEY_BYTES = 255
"""A property key is 1 to this many bytes of UTF-8."""

MAX_PROPERTY_VALUE_BYTES = 4096
"""A text property value is at most this many bytes of UTF-8 (empty is allowed)."""

MAX_PROPERTIES_BYTES = 16 * 1024
"""The keys and encoded values of one message's properties together, in bytes (UTF-8
for text, 8 for an integer or a float, 1 for a boolean): well within the room a SEND
frame has besides its body (SEND_OVERHEAD_BYTES)."""

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


class PropertyType(enum.IntEnum):
    """The tag byte before each property value on the wire (revision 4): an ASCII
    letter, above 0x10, so that the first byte of a revision-3 value (the high byte
    of a length of at most 4096) is never a tag, and a tag never passes for one."""

    TEXT = 0x74  # "t"
    INTEGER = 0x69  # "i"
    FLOAT = 0x66  # "f"
    BOOLEAN = 0x62  # "b"


def property_type(value: object) -> PropertyType | None:
    """The wire type of a property value, or None when it has none. A bool is a
    BOOLEAN, never the INTEGER it subclasses.

    >>> [property_type(value).name for value in (True, 1, 1.5, "x")]
    ['BOOLEAN', 'INTEGER', 'FLOAT', 'TEXT']
    """
    if isinstance(value, bool):
        return PropertyType.BOOLEAN
    if isinstance(value, int):
        return PropertyType.INTEGER
    if isinstance(value, float):
        return PropertyType.FLOAT
    if isinstance(value, str):
        return PropertyType.TEXT
    return None


def properties_problem(properties: object) -> str | None:
    """What makes ``properties`` unfit for a message, or None when it is fit: a
    mapping of at most MAX_PROPERTIES text keys (1 to MAX_PROPERTY_KEY_BYTES bytes of
    UTF-8) to values that are text (at most MAX_PROPERTY_VALUE_BYTES bytes), 64-bit
    integers, finite floats or booleans.

    >>> properties_problem({"trace": "abc", "amount": 5, "ok": True}) is None
    True
    >>> properties_problem({"": "x"})
    'property key 1 is empty'
    >>> properties_problem({"n": 2**63})
    "property 'n': the integer 9223372036854775808 is outside the 64-bit range"
    """
    if not isinstance(properties, Mapping):
        return f"properties must be a mapping of text to values, not {type(properties).__name__}"
    if len(properties) > MAX_PROPERTIES:
        return f"{len(properties)} properties; a message carries at most {MAX_PROPERTIES}"
    total = 0
    for number, (key, value) in enumerate(properties.items(), 1):
        if not isinstance(key, str):
            return f"property {number}: keys are text (str), not {type(key).__name__}"
        problem = _key_problem(key) or _value_problem(value)
        if problem:
            return f"property {key!r}: {problem}" if key else f"property key {number} is empty"
        total += len(key.encode()) + value_size(value)
    if total > MAX_PROPERTIES_BYTES:
        return f"the properties are {total} bytes; a message carries at most {MAX_PROPERTIES_BYTES}"
    return None


def value_size(value: str | int | float | bool) -> int:
    """Bytes of a property value on the wire, its tag and length aside."""
    if isinstance(value, str):
        return len(value.encode())
    return 1 if isinstance(value, bool) else 8


def properties_size(properties: Mapping[str, str | int | float | bool]) -> int:
    """Bytes of the keys and encoded values; what a batch's byte limit counts of them."""
    return sum(len(key.encode()) + value_size(value) for key, value in properties.items())


def _key_problem(key: str) -> str | None:
    try:
        size = len(key.encode())
    except UnicodeEncodeError:
        return "not encodable as UTF-8"
    if not 1 <= size <= MAX_PROPERTY_KEY_BYTES:
        return f"a key is 1 to {MAX_PROPERTY_KEY_BYTES} bytes of UTF-8, not {size}"
    if "\x00" in key:
        return "a key holds a NUL character, which Courier cannot store"
    return None


def _value_problem(value: object) -> str | None:
    if isinstance(value, str):
        return _text_problem(value)
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            return f"the integer {value} is outside the 64-bit range"
        return None
    if isinstance(value, float):
        if not math.isfinite(value):
            return f"the float {value} is not finite; only finite floats are carried"
        return None
    return f"a value is text, an integer, a float or a boolean, not {type(value).__name__}"


def _text_problem(value: str) -> str | None:
    try:
        size = len(value.encode())
    except UnicodeEncodeError:
        return "not encodable as UTF-8"
    if size > MAX_PROPERTY_VALUE_BYTES:
        return f"a value is at most {MAX_PROPERTY_VALUE_BYTES} bytes of UTF-8, not {size}"
    if "\x00" in value:
        return "a value holds a NUL character, which Courier cannot store"
    return None


class Opcode(enum.IntEnum):
    """What a frame asks for; a reply carries the opcode of its request."""

    PING = 0x01
    REGISTER = 0x02
    LOGIN = 0x03
    LOGOUT = 0x04
    CANCEL = 0x05
    LOGIN_START = 0x06
    LOGIN_PROOF = 0x07
    SET_SECRET = 0x08
    SET_CLIENT_ENABLED = 0x09
    GET_CLIENT = 0x0A
    CREATE_QUEUE = 0x10
    DELETE_QUEUE = 0x11
    GET_QUEUE = 0x12
    LIST_QUEUES = 0x13
    CONFIGURE_QUEUE = 0x14
    SET_QUEUE_ACL = 0x15
    GET_QUEUE_ACL = 0x16
    SEND = 0x20
    READ = 0x21
    RECEIVE = 0x22
    AWAIT_RESPONSE = 0x23
    QUEUES_FOR_ME = 0x24
    ACK = 0x25
    NACK = 0x26
    EXTEND = 0x27
    SEND_MANY = 0x28
    RECEIVE_MANY = 0x29
    ACK_MANY = 0x2A
    NACK_MANY = 0x2B
    CREATE_TOPIC = 0x30
    DELETE_TOPIC = 0x31
    GET_TOPIC = 0x32
    LIST_TOPICS = 0x33
    SUBSCRIBE = 0x34
    UNSUBSCRIBE = 0x35
    PUBLISH = 0x36
    COMMIT = 0x37
    CREATE_REPLICATED = 0x40
    DELETE_REPLICATED = 0x41
    GET_REPLICATED = 0x42
    JOIN_REPLICATED = 0x43
    LEAVE_REPLICATED = 0x44


PRE_LOGIN_OPCODES = frozenset(
    {Opcode.PING, Opcode.REGISTER, Opcode.LOGIN, Opcode.LOGIN_START, Opcode.LOGIN_PROOF}
)
"""The only requests a server accepts before a login; others get NOT_LOGGED_IN."""

NO_OPCODE = 0x00
"""Opcode of an error reply about the connection itself (bad version, oversize frame)."""
