"""Request bodies, one layout per opcode (docs/protocol.md, "Requests")."""

from __future__ import annotations

from collections.abc import Callable

from courier.protocol import frames, wire
from courier.protocol.constants import Opcode

# Login and GetQueue name their target either way; this byte says which.
BY_ID = 1
BY_NAME = 2


def write_request(writer: wire.Writer, request: frames.Request) -> None:
    """Append the body of ``request`` (the header is the caller's business)."""
    match request:
        case frames.Ping() | frames.Logout() | frames.ListQueues() | frames.QueuesForMe():
            pass
        case frames.Register(name=name, mode=mode):
            writer.name(name, "name")
            wire.write_mode(writer, mode, "mode")
        case frames.Login(client_id=client_id, name=name):
            write_lookup(writer, client_id, name, "client_id")
        case frames.CreateQueue(name=name):
            writer.name(name, "name")
        case frames.DeleteQueue(queue_id=queue_id, if_empty=if_empty):
            writer.i64(queue_id, "queue_id")
            writer.boolean(if_empty, "if_empty")
        case frames.GetQueue(queue_id=queue_id, name=name):
            write_lookup(writer, queue_id, name, "queue_id")
        case frames.Send():
            write_send(writer, request)
        case frames.Read(queue_id=queue_id, sender_id=sender_id, order=order, pop=pop):
            writer.optional_id(queue_id, "queue_id")
            writer.optional_id(sender_id, "sender_id")
            wire.write_order(writer, order, "order")
            writer.boolean(pop, "pop")
        case frames.Receive(queue_id=queue_id, sender_id=sender_id, order=order):
            writer.i64(queue_id, "queue_id")
            writer.optional_id(sender_id, "sender_id")
            wire.write_order(writer, order, "order")
            writer.u32(request.timeout_ms, "timeout_ms")
        case frames.AwaitResponse(queue_id=queue_id, context=context, timeout_ms=timeout_ms):
            writer.i64(queue_id, "queue_id")
            writer.i64(context, "context")
            writer.u32(timeout_ms, "timeout_ms")


def write_lookup(writer: wire.Writer, key: int | None, name: str | None, field: str) -> None:
    if (key is None) == (name is None):
        raise writer.fail(f"give exactly one of {field} and name")
    if key is not None:
        writer.u8(BY_ID, "lookup")
        writer.i64(key, field)
    elif name is not None:
        writer.u8(BY_NAME, "lookup")
        writer.name(name, "name")


def write_send(writer: wire.Writer, send: frames.Send) -> None:
    writer.u16(len(send.queue_ids), "len(queue_ids)")
    for queue_id in send.queue_ids:
        writer.i64(queue_id, "queue_ids[]")
    writer.optional_id(send.receiver, "receiver")
    writer.u8(send.priority, "priority")
    writer.optional_i64(send.context, "context")
    writer.text(send.body, "body")


def read_lookup(reader: wire.Reader, field: str) -> tuple[int | None, str | None]:
    kind = reader.u8("lookup")
    if kind == BY_ID:
        return reader.i64(field), None
    if kind == BY_NAME:
        return None, reader.name("name")
    raise reader.fail(f"lookup code {kind} is unknown (1 = by id, 2 = by name)")


def read_login(reader: wire.Reader) -> frames.Login:
    return frames.Login(*read_lookup(reader, "client_id"))


def read_get_queue(reader: wire.Reader) -> frames.GetQueue:
    return frames.GetQueue(*read_lookup(reader, "queue_id"))


def read_register(reader: wire.Reader) -> frames.Register:
    return frames.Register(name=reader.name("name"), mode=reader.mode("mode"))


def read_create_queue(reader: wire.Reader) -> frames.CreateQueue:
    return frames.CreateQueue(name=reader.name("name"))


def read_delete_queue(reader: wire.Reader) -> frames.DeleteQueue:
    return frames.DeleteQueue(queue_id=reader.i64("queue_id"), if_empty=reader.boolean("if_empty"))


def read_send(reader: wire.Reader) -> frames.Send:
    count = reader.u16("len(queue_ids)")
    queue_ids = tuple(reader.i64("queue_ids[]") for _ in range(count))
    return frames.Send(
        queue_ids=queue_ids,
        receiver=reader.optional_id("receiver"),
        priority=reader.u8("priority"),
        context=reader.optional_i64("context"),
        body=reader.text("body"),
    )


def read_read(reader: wire.Reader) -> frames.Read:
    return frames.Read(
        queue_id=reader.optional_id("queue_id"),
        sender_id=reader.optional_id("sender_id"),
        order=reader.order("order"),
        pop=reader.boolean("pop"),
    )


def read_receive(reader: wire.Reader) -> frames.Receive:
    return frames.Receive(
        queue_id=reader.i64("queue_id"),
        sender_id=reader.optional_id("sender_id"),
        order=reader.order("order"),
        timeout_ms=reader.u32("timeout_ms"),
    )


def read_await_response(reader: wire.Reader) -> frames.AwaitResponse:
    return frames.AwaitResponse(
        queue_id=reader.i64("queue_id"),
        context=reader.i64("context"),
        timeout_ms=reader.u32("timeout_ms"),
    )


def constant(request: frames.Request) -> Callable[[wire.Reader], frames.Request]:
    """A reader for a request with an empty body."""
    return lambda reader: request


READERS: dict[Opcode, Callable[[wire.Reader], frames.Request]] = {
    Opcode.PING: constant(frames.Ping()),
    Opcode.REGISTER: read_register,
    Opcode.LOGIN: read_login,
    Opcode.LOGOUT: constant(frames.Logout()),
    Opcode.CREATE_QUEUE: read_create_queue,
    Opcode.DELETE_QUEUE: read_delete_queue,
    Opcode.GET_QUEUE: read_get_queue,
    Opcode.LIST_QUEUES: constant(frames.ListQueues()),
    Opcode.SEND: read_send,
    Opcode.READ: read_read,
    Opcode.RECEIVE: read_receive,
    Opcode.AWAIT_RESPONSE: read_await_response,
    Opcode.QUEUES_FOR_ME: constant(frames.QueuesForMe()),
}
"""How to read each request body; the caller then checks for trailing bytes."""
