"""Whole frames to bytes (``encode``) and back (``parse``); no I/O.

Cutting a byte stream into frames is ``decoder.Decoder``'s job; ``parse`` then
turns one ``RawFrame`` into a typed request or reply, so a server can time body
decoding on its own.
"""

from __future__ import annotations

import struct

from courier.protocol import constants, exceptions, frames, replies, requests, wire
from courier.protocol.constants import Opcode

# Reply types that answer exactly one opcode, so encode can fill the header alone.
SOLE_OPCODE: dict[type[frames.Reply], int] = {
    frames.Pong: Opcode.PING,
    frames.ClientIdentityReply: Opcode.GET_CLIENT,
    frames.MessageIdsReply: Opcode.SEND,
    frames.QueueSettingsReply: Opcode.CONFIGURE_QUEUE,
    frames.LoginChallenge: Opcode.LOGIN_START,
    frames.LoginReply: Opcode.LOGIN_PROOF,
    frames.SubscriptionReply: Opcode.SUBSCRIBE,
    frames.PublishReply: Opcode.PUBLISH,
    frames.CommitReply: Opcode.COMMIT,
    frames.TopicListReply: Opcode.LIST_TOPICS,
    frames.PlaceReply: Opcode.JOIN_REPLICATED,
    frames.ErrorReply: constants.NO_OPCODE,
}


def encode(
    request_id: int, message: frames.Request | frames.Reply, *, opcode: int | None = None
) -> bytes:
    """The whole frame, header included, that carries ``message``.

    A reply's header repeats its request's opcode: pass ``opcode=`` for every reply
    type that answers more than one opcode (ClientReply, Done, QueueReply, ...), and
    for an ErrorReply (which otherwise goes out with opcode 0, meaning "about the
    connection"). A request's opcode follows from its type.
    """
    if frames.is_request(message):
        writer = wire.Writer(request_opcode(message, opcode))
        requests.write_request(writer, message)
        return finish(writer, request_id, flags=0)
    if frames.is_reply(message):
        writer = wire.Writer(reply_opcode(message, opcode))
        replies.write_reply(writer, message)
        return finish(writer, request_id, flags=constants.FLAG_RESPONSE)
    raise exceptions.EncodeError(opcode or 0, f"{type(message).__name__} is not a frame type")


def request_opcode(request: frames.Request, opcode: int | None) -> int:
    own = frames.opcode_of(request)
    if opcode is not None and opcode != own:
        raise exceptions.EncodeError(own, f"{type(request).__name__} travels as {own.name}")
    return own


def reply_opcode(reply: frames.Reply, opcode: int | None) -> int:
    """The request opcode this reply answers, checked against the reply's type."""
    if opcode is None:
        if type(reply) in SOLE_OPCODE:
            return SOLE_OPCODE[type(reply)]
        raise exceptions.EncodeError(
            constants.NO_OPCODE, f"{type(reply).__name__} needs opcode= (the request's opcode)"
        )
    if isinstance(reply, frames.ErrorReply):
        return opcode
    if answers(opcode) is not type(reply):
        raise exceptions.EncodeError(opcode, f"{type(reply).__name__} does not answer it")
    return opcode


def answers(opcode: int) -> type[frames.Reply] | None:
    """The successful reply type for a request opcode; None for an unknown opcode."""
    return frames.REPLY_TYPES.get(opcode)


def finish(writer: wire.Writer, request_id: int, flags: int) -> bytes:
    """Fill in the header reserved at the front of the writer's buffer."""
    body_length = len(writer.buffer) - constants.HEADER_SIZE
    try:
        constants.HEADER.pack_into(
            writer.buffer, 0, constants.VERSION, writer.opcode, flags, request_id, body_length
        )
    except struct.error as exc:
        raise writer.fail(f"request_id={request_id!r} or body length {body_length}: {exc}") from exc
    return bytes(writer.buffer)


def parse(raw: frames.RawFrame) -> frames.Request | frames.Reply:
    """Decode the body of one frame: a reply if the response flag is set, else a request."""
    if raw.version != constants.VERSION:
        raise exceptions.UnsupportedVersion(raw.version)
    reader = wire.Reader(raw.opcode, raw.body)
    message: frames.Request | frames.Reply = (
        replies.read_reply(reader) if raw.is_response else read_request_body(reader)
    )
    reader.finish()
    return message


def read_request_body(reader: wire.Reader) -> frames.Request:
    read = requests.READERS.get(reader.opcode)
    if read is None:
        raise exceptions.UnknownOpcode(reader.opcode)
    return read(reader)
