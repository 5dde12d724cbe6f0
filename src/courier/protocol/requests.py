"""Request bodies, one layout per opcode (docs/protocol.md, "Requests")."""

from __future__ import annotations

import struct
from collections.abc import Callable

from courier import models
from courier.protocol import constants, frames, replicated, wire
from courier.protocol.constants import Opcode

# Login, GetClient and GetQueue name their target either way; this byte says which.
BY_ID = 1
BY_NAME = 2

# The common SEND and READ, each read and written with one or two struct calls rather
# than a call per field (ten or more, on both the client and the middleware): a send
# to one queue without context, dedup id or properties; a read without selector. Any
# other body, or a field out of range, takes the checked layout, which names the field.
SEND_ONE_HEAD = struct.Struct(">HqqBBI")  # 1 queue, it, receiver, priority, no context, len(body)
SEND_PLAIN_TAIL = struct.Struct(">IIHHB")  # delay, ttl, no dedup id, no properties, persistent
READ_PLAIN = struct.Struct(">qqBBIH")  # queue, sender, order, pop, lease, no selector


def write_request(writer: wire.Writer, request: frames.Request) -> None:
    """Append the body of ``request`` (the header is the caller's business)."""
    match request:  # each case is an isinstance check, in order: the hot ones first
        case frames.Send():
            write_send(writer, request)
        case frames.Read():
            write_read(writer, request)
        case (
            frames.Ping() | frames.Logout() | frames.ListQueues() | frames.QueuesForMe()
            | frames.ListTopics()
        ):  # fmt: skip
            pass
        case frames.Register(name=name, mode=mode, verifier=verifier):
            writer.name(name, "name")
            wire.write_mode(writer, mode, "mode")
            write_optional_verifier(writer, verifier)
        case frames.Login(client_id=client_id, name=name):
            write_lookup(writer, client_id, name, "client_id")
        case frames.LoginStart(client_id=client_id, name=name, client_nonce=nonce):
            write_lookup(writer, client_id, name, "client_id")
            writer.name(nonce, "client_nonce")
        case frames.LoginProof(proof=proof):
            writer.blob(proof, "proof")
        case frames.SetSecret(client_id=client_id, name=name, verifier=verifier):
            write_lookup(writer, client_id, name, "client_id")
            write_verifier(writer, verifier)
        case frames.SetClientEnabled(client_id=client_id, name=name, enabled=enabled):
            write_lookup(writer, client_id, name, "client_id")
            writer.boolean(enabled, "enabled")
        case frames.GetClient(client_id=client_id, name=name):
            write_lookup(writer, client_id, name, "client_id")
        case frames.Cancel(request_id=request_id):
            writer.u32(request_id, "request_id")
        case frames.CreateQueue(name=name):
            writer.name(name, "name")
        case frames.DeleteQueue(queue_id=queue_id, if_empty=if_empty):
            writer.i64(queue_id, "queue_id")
            writer.boolean(if_empty, "if_empty")
        case frames.GetQueue(queue_id=queue_id, name=name):
            write_lookup(writer, queue_id, name, "queue_id")
        case frames.ConfigureQueue():
            write_configure_queue(writer, request)
        case frames.SetQueueAcl(queue_id=queue_id, senders=senders, readers=readers):
            writer.i64(queue_id, "queue_id")
            write_client_list(writer, senders, "senders")
            write_client_list(writer, readers, "readers")
        case frames.GetQueueAcl(queue_id=queue_id):
            writer.i64(queue_id, "queue_id")
        case frames.Receive():
            write_receive(writer, request)
        case frames.AwaitResponse(queue_id=queue_id, context=context, timeout_ms=timeout_ms):
            writer.i64(queue_id, "queue_id")
            writer.i64(context, "context")
            writer.u32(timeout_ms, "timeout_ms")
        case frames.Ack(delivery_id=delivery_id):
            writer.i64(delivery_id, "delivery_id")
        case frames.Nack(delivery_id=delivery_id, delay_ms=delay_ms, reason=reason):
            writer.i64(delivery_id, "delivery_id")
            writer.u32(delay_ms, "delay_ms")
            writer.optional_name(reason, "reason")
        case frames.Extend(delivery_id=delivery_id, lease_ms=lease_ms):
            writer.i64(delivery_id, "delivery_id")
            writer.u32(lease_ms, "lease_ms")
        case frames.SendMany():
            write_send_many(writer, request)
        case frames.ReceiveMany():
            write_receive_many(writer, request)
        case frames.AckMany(delivery_ids=delivery_ids):
            write_deliveries(writer, delivery_ids)
        case frames.NackMany(delivery_ids=delivery_ids, delay_ms=delay_ms, reason=reason):
            write_deliveries(writer, delivery_ids)
            writer.u32(delay_ms, "delay_ms")
            writer.optional_name(reason, "reason")
        case _:
            write_pubsub_request(writer, request)


def write_pubsub_request(writer: wire.Writer, request: frames.Request) -> None:
    """The requests of the 0x30 block: topics and COMMIT."""
    match request:
        case frames.CreateTopic(name=name):
            writer.name(name, "name")
        case frames.DeleteTopic(topic_id=topic_id, name=name):
            write_lookup(writer, topic_id, name, "topic_id")
        case frames.GetTopic(topic_id=topic_id, name=name):
            write_lookup(writer, topic_id, name, "topic_id")
        case frames.Subscribe():
            write_lookup(writer, request.topic_id, request.topic_name, "topic_id")
            writer.optional_name(request.subscription, "subscription")
            writer.boolean(request.durable, "durable")
        case frames.Unsubscribe(queue_id=queue_id):
            writer.i64(queue_id, "queue_id")
        case frames.Publish():
            write_publish(writer, request)
        case frames.Commit():
            write_commit(writer, request)
        case _ if replicated.write_request(writer, request):
            pass


def write_commit(writer: wire.Writer, commit: frames.Commit) -> None:
    """Each operation is its opcode, then its body as that request's."""
    count = len(commit.operations)
    if count > constants.MAX_TRANSACTION_OPERATIONS:
        raise writer.fail(
            f"len(operations)={count}: a transaction holds at most"
            f" {constants.MAX_TRANSACTION_OPERATIONS}"
        )
    writer.u32(commit.age_ms, "age_ms")
    writer.u16(count, "len(operations)")
    for operation in commit.operations:
        writer.u8(frames.opcode_of(operation), "operations[].opcode")
        write_request(writer, operation)


def write_publish(writer: wire.Writer, publish: frames.Publish) -> None:
    write_lookup(writer, publish.topic_id, publish.topic_name, "topic_id")
    writer.optional_id(publish.receiver, "receiver")
    writer.u8(publish.priority, "priority")
    writer.optional_i64(publish.context, "context")
    writer.blob(publish.body, "body")
    writer.u32(publish.delay_ms, "delay_ms")
    writer.optional_u32(publish.ttl_ms, "ttl_ms")
    writer.optional_name(publish.dedup_id, "dedup_id")
    writer.properties(publish.properties, "properties")  # added at the end, as for SEND
    writer.boolean(publish.persistent, "persistent")


def write_lookup(writer: wire.Writer, key: int | None, name: str | None, field: str) -> None:
    if (key is None) == (name is None):
        raise writer.fail(f"give exactly one of {field} and name")
    if key is not None:
        writer.u8(BY_ID, "lookup")
        writer.i64(key, field)
    elif name is not None:
        writer.u8(BY_NAME, "lookup")
        writer.name(name, "name")


def write_verifier(writer: wire.Writer, verifier: models.Verifier) -> None:
    writer.blob(verifier.salt, "verifier.salt")
    writer.u32(verifier.iterations, "verifier.iterations")
    writer.blob(verifier.stored_key, "verifier.stored_key")
    writer.blob(verifier.server_key, "verifier.server_key")


def write_optional_verifier(writer: wire.Writer, verifier: models.Verifier | None) -> None:
    writer.boolean(verifier is not None, "has_verifier")
    if verifier is not None:
        write_verifier(writer, verifier)


def write_configure_queue(writer: wire.Writer, configure: frames.ConfigureQueue) -> None:
    writer.i64(configure.queue_id, "queue_id")
    writer.optional_u32(configure.max_deliveries, "max_deliveries")
    writer.optional_id(configure.dead_letter_queue, "dead_letter_queue")
    writer.boolean(configure.dead_letter_expired, "dead_letter_expired")
    writer.optional_u32(configure.max_messages, "max_messages")
    writer.optional_i64(configure.max_bytes, "max_bytes")
    wire.write_code(writer, wire.OVERFLOW_CODES, configure.overflow, "overflow")


def write_queue_acl(writer: wire.Writer, acl: models.QueueAcl) -> None:
    """A queue id and two optional lists of client ids (absent: anyone)."""
    writer.i64(acl.queue, "acl.queue")
    for field, clients in (("acl.senders", acl.senders), ("acl.readers", acl.readers)):
        writer.boolean(clients is not None, f"has({field})")
        if clients is not None:
            writer.u16(len(clients), f"len({field})")
            for client_id in clients:
                writer.i64(client_id, f"{field}[]")


def write_client_list(
    writer: wire.Writer, clients: tuple[int | str, ...] | None, field: str
) -> None:
    """An optional list (absent: anyone) of clients, each by id or by name."""
    writer.boolean(clients is not None, f"has({field})")
    if clients is not None:
        writer.u16(len(clients), f"len({field})")
        for client in clients:
            if isinstance(client, int):
                write_lookup(writer, client, None, f"{field}[]")
            else:
                write_lookup(writer, None, client, f"{field}[]")


def read_client_list(reader: wire.Reader, field: str) -> tuple[int | str, ...] | None:
    if not reader.boolean(f"has({field})"):
        return None
    clients: list[int | str] = []
    for _ in range(reader.u16(f"len({field})")):
        client_id, name = read_lookup(reader, f"{field}[]")
        clients.append(client_id if client_id is not None else str(name))
    return tuple(clients)


def read_set_queue_acl(reader: wire.Reader) -> frames.SetQueueAcl:
    queue_id = reader.i64("queue_id")
    senders = read_client_list(reader, "senders")
    return frames.SetQueueAcl(queue_id, senders, read_client_list(reader, "readers"))


def read_queue_acl(reader: wire.Reader) -> models.QueueAcl:
    queue = reader.i64("acl.queue")
    lists: list[tuple[int, ...] | None] = []
    for field in ("acl.senders", "acl.readers"):
        if reader.boolean(f"has({field})"):
            count = reader.u16(f"len({field})")
            lists.append(tuple(reader.i64(f"{field}[]") for _ in range(count)))
        else:
            lists.append(None)
    return models.QueueAcl(queue, lists[0], lists[1])


def write_send(writer: wire.Writer, send: frames.Send) -> None:
    if not (is_plain_send(send) and write_send_packed(writer, send)):
        write_send_checked(writer, send)


def is_plain_send(send: frames.Send) -> bool:
    return (
        len(send.queue_ids) == 1 and send.context is None and send.dedup_id is None
        and not send.properties and type(send.body) is bytes
        and (send.receiver is None or send.receiver > 0)
        and (send.ttl_ms is None or send.ttl_ms > 0)
    )  # fmt: skip


def write_send_packed(writer: wire.Writer, send: frames.Send) -> bool:
    """Write a plain send in two struct calls; False (nothing written) when a field
    does not fit, for the checked writer to name it."""
    try:
        head = SEND_ONE_HEAD.pack(1, send.queue_ids[0], send.receiver or 0, send.priority, 0,
                                  len(send.body))  # fmt: skip
        tail = SEND_PLAIN_TAIL.pack(send.delay_ms, send.ttl_ms or 0, 0, 0, bool(send.persistent))
    except (struct.error, TypeError):
        return False
    writer.buffer += head
    writer.buffer += send.body
    writer.buffer += tail
    return True


def write_send_checked(writer: wire.Writer, send: frames.Send) -> None:
    write_queue_ids(writer, send.queue_ids)
    writer.optional_id(send.receiver, "receiver")
    writer.u8(send.priority, "priority")
    writer.optional_i64(send.context, "context")
    writer.blob(send.body, "body")
    # Fields added after the body, so the layout before them is unchanged.
    writer.u32(send.delay_ms, "delay_ms")
    writer.optional_u32(send.ttl_ms, "ttl_ms")
    writer.optional_name(send.dedup_id, "dedup_id")
    writer.properties(send.properties, "properties")
    writer.boolean(send.persistent, "persistent")


def write_queue_ids(writer: wire.Writer, queue_ids: tuple[int, ...]) -> None:
    writer.u16(len(queue_ids), "len(queue_ids)")
    for queue_id in queue_ids:
        writer.i64(queue_id, "queue_ids[]")


def write_batch_count(writer: wire.Writer, count: int, field: str) -> None:
    if count > constants.MAX_BATCH_MESSAGES:
        raise writer.fail(f"{field}={count}: a batch holds at most {constants.MAX_BATCH_MESSAGES}")
    writer.u16(count, field)


def write_send_many(writer: wire.Writer, send: frames.SendMany) -> None:
    write_queue_ids(writer, send.queue_ids)
    write_batch_count(writer, len(send.messages), "len(messages)")
    for draft in send.messages:
        writer.optional_id(draft.receiver, "receiver")
        writer.u8(draft.priority, "priority")
        writer.optional_i64(draft.context, "context")
        writer.u32(draft.delay_ms, "delay_ms")
        writer.optional_u32(draft.ttl_ms, "ttl_ms")
        writer.optional_name(draft.dedup_id, "dedup_id")
        writer.blob(draft.body, "body")
        writer.properties(draft.properties, "properties")
        writer.boolean(draft.persistent, "persistent")


def write_receive_many(writer: wire.Writer, receive: frames.ReceiveMany) -> None:
    writer.i64(receive.queue_id, "queue_id")
    writer.optional_id(receive.sender_id, "sender_id")
    wire.write_order(writer, receive.order, "order")
    write_batch_count(writer, receive.max_messages, "max_messages")
    write_batch_count(writer, receive.min_messages, "min_messages")
    writer.u32(receive.timeout_ms, "timeout_ms")
    writer.u32(receive.max_wait_ms, "max_wait_ms")
    writer.u32(receive.lease_ms, "lease_ms")
    writer.optional_name(receive.selector, "selector")  # revision 4


def write_deliveries(writer: wire.Writer, delivery_ids: tuple[int, ...]) -> None:
    write_batch_count(writer, len(delivery_ids), "len(delivery_ids)")
    for delivery_id in delivery_ids:
        writer.i64(delivery_id, "delivery_ids[]")


def write_read(writer: wire.Writer, read: frames.Read) -> None:
    if not (read.selector is None and write_read_packed(writer, read)):
        write_read_checked(writer, read)


def write_read_packed(writer: wire.Writer, read: frames.Read) -> bool:
    """Write a read without selector in one struct call; False (nothing written) when
    a field is out of range, for the checked writer to name it."""
    if (read.queue_id is not None and read.queue_id <= 0) or (
        read.sender_id is not None and read.sender_id <= 0
    ):
        return False
    try:
        order = wire.ORDER_CODES[read.order]
        writer.buffer += READ_PLAIN.pack(read.queue_id or 0, read.sender_id or 0, order,
                                         bool(read.pop), read.lease_ms, 0)  # fmt: skip
    except (KeyError, struct.error, TypeError):
        return False
    return True


def write_read_checked(writer: wire.Writer, read: frames.Read) -> None:
    writer.optional_id(read.queue_id, "queue_id")
    writer.optional_id(read.sender_id, "sender_id")
    wire.write_order(writer, read.order, "order")
    writer.boolean(read.pop, "pop")
    writer.u32(read.lease_ms, "lease_ms")
    writer.optional_name(read.selector, "selector")  # revision 4


def write_receive(writer: wire.Writer, receive: frames.Receive) -> None:
    writer.i64(receive.queue_id, "queue_id")
    writer.optional_id(receive.sender_id, "sender_id")
    wire.write_order(writer, receive.order, "order")
    writer.u32(receive.timeout_ms, "timeout_ms")
    writer.u32(receive.lease_ms, "lease_ms")
    writer.optional_name(receive.selector, "selector")  # revision 4


def read_lookup(reader: wire.Reader, field: str) -> tuple[int | None, str | None]:
    kind = reader.u8("lookup")
    if kind == BY_ID:
        return reader.i64(field), None
    if kind == BY_NAME:
        return None, reader.name("name")
    raise reader.fail(f"lookup code {kind} is unknown (1 = by id, 2 = by name)")


def read_login(reader: wire.Reader) -> frames.Login:
    return frames.Login(*read_lookup(reader, "client_id"))


def read_get_client(reader: wire.Reader) -> frames.GetClient:
    return frames.GetClient(*read_lookup(reader, "client_id"))


def read_get_queue(reader: wire.Reader) -> frames.GetQueue:
    return frames.GetQueue(*read_lookup(reader, "queue_id"))


def read_register(reader: wire.Reader) -> frames.Register:
    name, mode = reader.name("name"), reader.mode("mode")
    verifier = read_verifier(reader) if reader.boolean("has_verifier") else None
    return frames.Register(name=name, mode=mode, verifier=verifier)


def read_verifier(reader: wire.Reader) -> models.Verifier:
    return models.Verifier(
        salt=reader.blob("verifier.salt"),
        iterations=reader.u32("verifier.iterations"),
        stored_key=reader.blob("verifier.stored_key"),
        server_key=reader.blob("verifier.server_key"),
    )


def read_login_start(reader: wire.Reader) -> frames.LoginStart:
    client_id, name = read_lookup(reader, "client_id")
    return frames.LoginStart(client_id, name, reader.name("client_nonce"))


def read_login_proof(reader: wire.Reader) -> frames.LoginProof:
    return frames.LoginProof(proof=reader.blob("proof"))


def read_set_secret(reader: wire.Reader) -> frames.SetSecret:
    client_id, name = read_lookup(reader, "client_id")
    return frames.SetSecret(client_id, name, read_verifier(reader))


def read_set_client_enabled(reader: wire.Reader) -> frames.SetClientEnabled:
    client_id, name = read_lookup(reader, "client_id")
    return frames.SetClientEnabled(client_id, name, reader.boolean("enabled"))


def read_create_queue(reader: wire.Reader) -> frames.CreateQueue:
    return frames.CreateQueue(name=reader.name("name"))


def read_delete_queue(reader: wire.Reader) -> frames.DeleteQueue:
    return frames.DeleteQueue(queue_id=reader.i64("queue_id"), if_empty=reader.boolean("if_empty"))


def read_cancel(reader: wire.Reader) -> frames.Cancel:
    return frames.Cancel(request_id=reader.u32("request_id"))


def read_configure_queue(reader: wire.Reader) -> frames.ConfigureQueue:
    return frames.ConfigureQueue(
        queue_id=reader.i64("queue_id"),
        max_deliveries=reader.optional_u32("max_deliveries"),
        dead_letter_queue=reader.optional_id("dead_letter_queue"),
        dead_letter_expired=reader.boolean("dead_letter_expired"),
        max_messages=reader.optional_u32("max_messages"),
        max_bytes=reader.optional_i64("max_bytes"),
        overflow=reader.overflow("overflow"),
    )


def read_send(reader: wire.Reader) -> frames.Send:
    return read_send_packed(reader) or read_send_checked(reader)


def read_send_packed(reader: wire.Reader) -> frames.Send | None:
    """A plain send (see SEND_ONE_HEAD) in two struct calls; None for any other body,
    which the checked reader then reads (or names what is wrong with it)."""
    body, start = reader.body, reader.offset
    if len(body) - start < SEND_ONE_HEAD.size + SEND_PLAIN_TAIL.size:
        return None
    count, queue_id, receiver, priority, has_context, length = SEND_ONE_HEAD.unpack_from(
        body, start
    )
    body_start = start + SEND_ONE_HEAD.size
    body_end = body_start + length
    if count != 1 or has_context or body_end + SEND_PLAIN_TAIL.size != len(body):
        return None
    delay_ms, ttl_ms, dedup_length, properties, persistent = SEND_PLAIN_TAIL.unpack_from(
        body, body_end
    )
    if dedup_length or properties or persistent > 1:
        return None
    reader.offset = len(body)
    return frames.Send(
        queue_ids=(queue_id,), receiver=receiver or None, priority=priority, context=None,
        body=body[body_start:body_end], delay_ms=delay_ms, ttl_ms=ttl_ms or None,
        dedup_id=None, properties={}, persistent=persistent == 1,
    )  # fmt: skip


def read_send_checked(reader: wire.Reader) -> frames.Send:
    count = reader.u16("len(queue_ids)")
    queue_ids = tuple(reader.i64("queue_ids[]") for _ in range(count))
    return frames.Send(
        queue_ids=queue_ids,
        receiver=reader.optional_id("receiver"),
        priority=reader.u8("priority"),
        context=reader.optional_i64("context"),
        body=reader.blob("body"),
        delay_ms=reader.u32("delay_ms"),
        ttl_ms=reader.optional_u32("ttl_ms"),
        dedup_id=reader.optional_name("dedup_id"),
        properties=reader.properties("properties"),
        persistent=reader.boolean("persistent"),
    )


def read_read(reader: wire.Reader) -> frames.Read:
    return read_read_packed(reader) or read_read_checked(reader)


def read_read_packed(reader: wire.Reader) -> frames.Read | None:
    """A read without selector in one struct call; None for any other body."""
    body, start = reader.body, reader.offset
    if len(body) - start != READ_PLAIN.size:
        return None
    queue_id, sender_id, order_code, pop, lease_ms, selector_length = READ_PLAIN.unpack_from(
        body, start
    )
    order = wire.ORDERS_BY_CODE.get(order_code)
    if order is None or pop > 1 or selector_length:
        return None
    reader.offset = len(body)
    return frames.Read(queue_id or None, sender_id or None, order, pop == 1, lease_ms, None)


def read_read_checked(reader: wire.Reader) -> frames.Read:
    return frames.Read(
        queue_id=reader.optional_id("queue_id"),
        sender_id=reader.optional_id("sender_id"),
        order=reader.order("order"),
        pop=reader.boolean("pop"),
        lease_ms=reader.u32("lease_ms"),
        selector=reader.optional_name("selector"),
    )


def read_receive(reader: wire.Reader) -> frames.Receive:
    return frames.Receive(
        queue_id=reader.i64("queue_id"),
        sender_id=reader.optional_id("sender_id"),
        order=reader.order("order"),
        timeout_ms=reader.u32("timeout_ms"),
        lease_ms=reader.u32("lease_ms"),
        selector=reader.optional_name("selector"),
    )


def read_await_response(reader: wire.Reader) -> frames.AwaitResponse:
    return frames.AwaitResponse(
        queue_id=reader.i64("queue_id"),
        context=reader.i64("context"),
        timeout_ms=reader.u32("timeout_ms"),
    )


def read_ack(reader: wire.Reader) -> frames.Ack:
    return frames.Ack(delivery_id=reader.i64("delivery_id"))


def read_nack(reader: wire.Reader) -> frames.Nack:
    return frames.Nack(
        delivery_id=reader.i64("delivery_id"),
        delay_ms=reader.u32("delay_ms"),
        reason=reader.optional_name("reason"),
    )


def read_extend(reader: wire.Reader) -> frames.Extend:
    return frames.Extend(delivery_id=reader.i64("delivery_id"), lease_ms=reader.u32("lease_ms"))


def read_batch_count(reader: wire.Reader, field: str) -> int:
    """A batch's count, refused above the limit before any of its items is read."""
    count = reader.u16(field)
    if count > constants.MAX_BATCH_MESSAGES:
        raise reader.fail(f"{field}={count}: a batch holds at most {constants.MAX_BATCH_MESSAGES}")
    return count


def read_send_many(reader: wire.Reader) -> frames.SendMany:
    count = reader.u16("len(queue_ids)")
    queue_ids = tuple(reader.i64("queue_ids[]") for _ in range(count))
    messages = tuple(read_draft(reader) for _ in range(read_batch_count(reader, "len(messages)")))
    return frames.SendMany(queue_ids=queue_ids, messages=messages)


def read_draft(reader: wire.Reader) -> models.Draft:
    return models.Draft(
        receiver=reader.optional_id("receiver"),
        priority=reader.u8("priority"),
        context=reader.optional_i64("context"),
        delay_ms=reader.u32("delay_ms"),
        ttl_ms=reader.optional_u32("ttl_ms"),
        dedup_id=reader.optional_name("dedup_id"),
        body=reader.blob("body"),
        properties=reader.properties("properties"),
        persistent=reader.boolean("persistent"),
    )


def read_receive_many(reader: wire.Reader) -> frames.ReceiveMany:
    return frames.ReceiveMany(
        queue_id=reader.i64("queue_id"),
        sender_id=reader.optional_id("sender_id"),
        order=reader.order("order"),
        max_messages=read_batch_count(reader, "max_messages"),
        min_messages=read_batch_count(reader, "min_messages"),
        timeout_ms=reader.u32("timeout_ms"),
        max_wait_ms=reader.u32("max_wait_ms"),
        lease_ms=reader.u32("lease_ms"),
        selector=reader.optional_name("selector"),
    )


def read_deliveries(reader: wire.Reader) -> tuple[int, ...]:
    count = read_batch_count(reader, "len(delivery_ids)")
    return tuple(reader.i64("delivery_ids[]") for _ in range(count))


def read_ack_many(reader: wire.Reader) -> frames.AckMany:
    return frames.AckMany(delivery_ids=read_deliveries(reader))


def read_nack_many(reader: wire.Reader) -> frames.NackMany:
    return frames.NackMany(
        delivery_ids=read_deliveries(reader),
        delay_ms=reader.u32("delay_ms"),
        reason=reader.optional_name("reason"),
    )


def read_create_topic(reader: wire.Reader) -> frames.CreateTopic:
    return frames.CreateTopic(name=reader.name("name"))


def read_delete_topic(reader: wire.Reader) -> frames.DeleteTopic:
    return frames.DeleteTopic(*read_lookup(reader, "topic_id"))


def read_get_topic(reader: wire.Reader) -> frames.GetTopic:
    return frames.GetTopic(*read_lookup(reader, "topic_id"))


def read_subscribe(reader: wire.Reader) -> frames.Subscribe:
    topic_id, topic_name = read_lookup(reader, "topic_id")
    return frames.Subscribe(
        topic_id=topic_id,
        topic_name=topic_name,
        subscription=reader.optional_name("subscription"),
        durable=reader.boolean("durable"),
    )


def read_unsubscribe(reader: wire.Reader) -> frames.Unsubscribe:
    return frames.Unsubscribe(queue_id=reader.i64("queue_id"))


def read_publish(reader: wire.Reader) -> frames.Publish:
    topic_id, topic_name = read_lookup(reader, "topic_id")
    return frames.Publish(
        topic_id=topic_id,
        topic_name=topic_name,
        receiver=reader.optional_id("receiver"),
        priority=reader.u8("priority"),
        context=reader.optional_i64("context"),
        body=reader.blob("body"),
        delay_ms=reader.u32("delay_ms"),
        ttl_ms=reader.optional_u32("ttl_ms"),
        dedup_id=reader.optional_name("dedup_id"),
        properties=reader.properties("properties"),
        persistent=reader.boolean("persistent"),
    )


def read_commit(reader: wire.Reader) -> frames.Commit:
    age_ms = reader.u32("age_ms")
    count = reader.u16("len(operations)")
    if count > constants.MAX_TRANSACTION_OPERATIONS:
        raise reader.fail(
            f"len(operations)={count}: a transaction holds at most"
            f" {constants.MAX_TRANSACTION_OPERATIONS}"
        )
    return frames.Commit(age_ms, tuple(read_operation(reader) for _ in range(count)))


def read_operation(reader: wire.Reader) -> frames.Send | frames.Publish | frames.Ack:
    opcode = reader.u8("operations[].opcode")
    if opcode not in constants.TRANSACTION_OPERATIONS:
        raise reader.fail(f"a transaction holds SEND, PUBLISH and ACK, not opcode {opcode:#04x}")
    operation = READERS[opcode](reader)
    assert isinstance(operation, frames.Send | frames.Publish | frames.Ack)
    return operation


def constant(request: frames.Request) -> Callable[[wire.Reader], frames.Request]:
    """A reader for a request with an empty body."""
    return lambda reader: request


READERS: dict[int, Callable[[wire.Reader], frames.Request]] = {
    Opcode.PING: constant(frames.Ping()),
    Opcode.REGISTER: read_register,
    Opcode.LOGIN: read_login,
    Opcode.LOGOUT: constant(frames.Logout()),
    Opcode.CANCEL: read_cancel,
    Opcode.LOGIN_START: read_login_start,
    Opcode.LOGIN_PROOF: read_login_proof,
    Opcode.SET_SECRET: read_set_secret,
    Opcode.SET_CLIENT_ENABLED: read_set_client_enabled,
    Opcode.GET_CLIENT: read_get_client,
    Opcode.CREATE_QUEUE: read_create_queue,
    Opcode.DELETE_QUEUE: read_delete_queue,
    Opcode.GET_QUEUE: read_get_queue,
    Opcode.LIST_QUEUES: constant(frames.ListQueues()),
    Opcode.CONFIGURE_QUEUE: read_configure_queue,
    Opcode.SET_QUEUE_ACL: read_set_queue_acl,
    Opcode.GET_QUEUE_ACL: lambda reader: frames.GetQueueAcl(reader.i64("queue_id")),
    Opcode.SEND: read_send,
    Opcode.READ: read_read,
    Opcode.RECEIVE: read_receive,
    Opcode.AWAIT_RESPONSE: read_await_response,
    Opcode.QUEUES_FOR_ME: constant(frames.QueuesForMe()),
    Opcode.ACK: read_ack,
    Opcode.NACK: read_nack,
    Opcode.EXTEND: read_extend,
    Opcode.SEND_MANY: read_send_many,
    Opcode.RECEIVE_MANY: read_receive_many,
    Opcode.ACK_MANY: read_ack_many,
    Opcode.NACK_MANY: read_nack_many,
    Opcode.CREATE_TOPIC: read_create_topic,
    Opcode.DELETE_TOPIC: read_delete_topic,
    Opcode.GET_TOPIC: read_get_topic,
    Opcode.LIST_TOPICS: constant(frames.ListTopics()),
    Opcode.SUBSCRIBE: read_subscribe,
    Opcode.UNSUBSCRIBE: read_unsubscribe,
    Opcode.PUBLISH: read_publish,
    Opcode.COMMIT: read_commit,
    **replicated.REQUEST_READERS,
}
"""How to read each request body; the caller then checks for trailing bytes."""
