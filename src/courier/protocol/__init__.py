"""The Courier wire protocol, sans-IO: typed frames, ``encode``, ``Decoder``, ``parse``.

    data = protocol.encode(request_id, protocol.Send(...))        # client -> bytes
    for raw in decoder.feed(chunk):                                # bytes -> frames
        request = protocol.parse(raw)                              # frame -> typed
        reply_bytes = protocol.encode(raw.request_id, reply, opcode=raw.opcode)

docs/protocol.md is the specification, with golden byte vectors the tests check.
"""

from __future__ import annotations

from courier.protocol.codec import encode, parse
from courier.protocol.constants import (
    FLAG_RESPONSE,
    HEADER_SIZE,
    MAX_FRAME_BYTES,
    MAX_MESSAGE_BODY_BYTES,
    MAX_NAME_BYTES,
    NO_OPCODE,
    PRE_LOGIN_OPCODES,
    VERSION,
    Opcode,
    frame_limit_for,
)
from courier.protocol.decoder import Decoder
from courier.protocol.exceptions import (
    EncodeError,
    FrameTooLarge,
    FramingError,
    MalformedBody,
    UnknownOpcode,
    UnsupportedVersion,
)
from courier.protocol.frames import (
    REPLY_TYPES,
    REQUEST_TYPES,
    AwaitResponse,
    ClientReply,
    CreateQueue,
    DeleteQueue,
    Done,
    ErrorReply,
    GetQueue,
    ListQueues,
    Login,
    Logout,
    MessageIdsReply,
    MessageReply,
    Ping,
    Pong,
    QueueListReply,
    QueueReply,
    QueuesForMe,
    RawFrame,
    Read,
    Receive,
    Register,
    Reply,
    Request,
    Send,
    is_reply,
    is_request,
    opcode_of,
    reply_type,
)

__all__ = [
    "FLAG_RESPONSE",
    "HEADER_SIZE",
    "MAX_FRAME_BYTES",
    "MAX_MESSAGE_BODY_BYTES",
    "MAX_NAME_BYTES",
    "NO_OPCODE",
    "PRE_LOGIN_OPCODES",
    "REPLY_TYPES",
    "REQUEST_TYPES",
    "VERSION",
    "AwaitResponse",
    "ClientReply",
    "CreateQueue",
    "Decoder",
    "DeleteQueue",
    "Done",
    "EncodeError",
    "ErrorReply",
    "FrameTooLarge",
    "FramingError",
    "GetQueue",
    "ListQueues",
    "Login",
    "Logout",
    "MalformedBody",
    "MessageIdsReply",
    "MessageReply",
    "Opcode",
    "Ping",
    "Pong",
    "QueueListReply",
    "QueueReply",
    "QueuesForMe",
    "RawFrame",
    "Read",
    "Receive",
    "Register",
    "Reply",
    "Request",
    "Send",
    "UnknownOpcode",
    "UnsupportedVersion",
    "encode",
    "frame_limit_for",
    "is_reply",
    "is_request",
    "opcode_of",
    "parse",
    "reply_type",
]
