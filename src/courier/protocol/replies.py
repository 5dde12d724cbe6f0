"""Reply bodies: a status byte, then an error message or the opcode's payload.

Layouts are in docs/protocol.md, "Replies". Value objects from ``models`` have one
layout each wherever they appear.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from courier import errors, models
from courier.protocol import constants, exceptions, frames, replicated, requests, wire

# The Message layout (docs/protocol.md) in the pieces between its variable fields:
# id, queue, sender, receiver, context presence | [context] | priority, created_at,
# len(body) | body | delivery, deliveries, dead_from, len(failure) | failure |
# properties (two zero bytes when there are none).
MESSAGE_HEAD = struct.Struct(">qqqqB")
MESSAGE_MIDDLE = struct.Struct(">BqI")
MESSAGE_TAIL = struct.Struct(">qIqH")


def write_reply(writer: wire.Writer, reply: frames.Reply) -> None:
    """Append the body of ``reply``, status byte first."""
    if isinstance(reply, frames.ErrorReply):
        write_error(writer, reply)
        return
    writer.buffer.append(errors.Status.OK)
    match reply:  # each case is an isinstance check, in order: the hot ones first
        case frames.MessageIdsReply(ids=ids):
            writer.u16(len(ids), "len(ids)")
            for message_id in ids:
                writer.i64(message_id, "ids[]")
        case frames.MessageReply(message=message):
            write_message(writer, message)
        case frames.Pong(server_time_ns=server_time_ns):
            writer.i64(server_time_ns, "server_time_ns")
        case frames.ClientReply(client=client):
            write_client(writer, client)
        case frames.ClientIdentityReply(client=identity):
            writer.i64(identity.id, "client.id")
            writer.name(identity.name, "client.name")
        case frames.Done():
            pass
        case frames.LoginChallenge(nonce=nonce, salt=salt, iterations=iterations):
            writer.name(nonce, "nonce")
            writer.blob(salt, "salt")
            writer.u32(iterations, "iterations")
        case frames.LoginReply(client=client, server_signature=signature):
            write_client(writer, client)
            writer.blob(signature, "server_signature")
        case frames.QueueReply(queue=queue):
            write_queue(writer, queue)
        case frames.QueueListReply(queues=queues):
            writer.u32(len(queues), "len(queues)")
            for queue in queues:
                write_queue(writer, queue)
        case frames.QueueSettingsReply(settings=settings):
            write_queue_settings(writer, settings)
        case frames.QueueAclReply(acl=acl):
            requests.write_queue_acl(writer, acl)
        case frames.BatchIdsReply(ids=ids):
            write_batch_ids(writer, ids)
        case frames.MessagesReply(messages=messages):
            writer.u16(len(messages), "len(messages)")
            for message in messages:
                write_message(writer, message)
        case frames.SettledReply(settled=settled):
            writer.u16(len(settled), "len(settled)")
            for one in settled:
                write_settled(writer, one)
        case _:
            write_pubsub_reply(writer, reply)


def write_pubsub_reply(writer: wire.Writer, reply: frames.Reply) -> None:
    """The replies of the 0x30 block: topics and COMMIT."""
    match reply:
        case frames.TopicReply(topic=topic):
            write_topic(writer, topic)
        case frames.TopicListReply(topics=topics):
            writer.u32(len(topics), "len(topics)")
            for topic in topics:
                write_topic(writer, topic)
        case frames.SubscriptionReply(subscription=subscription):
            write_subscription(writer, subscription)
        case frames.CommitReply(results=results):
            writer.u16(len(results), "len(results)")
            for ids in results:
                writer.u16(len(ids), "len(results[])")
                for message_id in ids:
                    writer.i64(message_id, "results[][]")
        case frames.PublishReply(queue_ids=queue_ids, message_ids=message_ids):
            if len(queue_ids) != len(message_ids):
                raise writer.fail("a publish has one message id per queue")
            writer.u16(len(queue_ids), "len(copies)")
            for queue_id, message_id in zip(queue_ids, message_ids, strict=True):
                writer.i64(queue_id, "queue_ids[]")
                writer.i64(message_id, "message_ids[]")
        case _ if replicated.write_reply(writer, reply):
            pass


def write_topic(writer: wire.Writer, topic: models.Topic) -> None:
    writer.i64(topic.id, "topic.id")
    writer.name(topic.name, "topic.name")
    writer.u16(len(topic.subscriptions), "len(topic.subscriptions)")
    for subscription in topic.subscriptions:
        write_subscription(writer, subscription)


def write_subscription(writer: wire.Writer, subscription: models.Subscription) -> None:
    writer.i64(subscription.queue, "subscription.queue")
    writer.name(subscription.queue_name, "subscription.queue_name")
    writer.i64(subscription.topic, "subscription.topic")
    writer.name(subscription.name, "subscription.name")
    writer.boolean(subscription.durable, "subscription.durable")
    writer.i64(subscription.subscriber, "subscription.subscriber")
    writer.i64(subscription.backlog, "subscription.backlog")


def write_error(writer: wire.Writer, reply: frames.ErrorReply) -> None:
    status = wire.STATUSES_BY_CODE.get(reply.status)
    if status is None or status is errors.Status.OK:
        raise writer.fail(f"status={reply.status!r} is not an error status")
    writer.buffer.append(status)
    writer.name(fit_message(reply.message), "message")


def fit_message(message: str) -> str:
    """Error messages may quote user input; cut them to the u16 length, not mid-character."""
    data = message.encode(errors="replace")
    if len(data) <= constants.MAX_NAME_BYTES:
        return message
    return data[: constants.MAX_NAME_BYTES].decode(errors="ignore")


def write_client(writer: wire.Writer, client: models.ClientInfo) -> None:
    writer.i64(client.id, "client.id")
    writer.name(client.name, "client.name")
    wire.write_mode(writer, client.mode, "client.mode")
    writer.boolean(client.online, "client.online")


def write_queue(writer: wire.Writer, queue: models.Queue) -> None:
    writer.i64(queue.id, "queue.id")
    writer.name(queue.name, "queue.name")
    writer.i64(queue.message_count, "queue.message_count")


def write_queue_settings(writer: wire.Writer, settings: models.QueueSettings) -> None:
    writer.i64(settings.queue, "settings.queue")
    writer.optional_u32(settings.max_deliveries, "settings.max_deliveries")
    writer.optional_id(settings.dead_letter_queue, "settings.dead_letter_queue")
    writer.boolean(settings.dead_letter_expired, "settings.dead_letter_expired")
    writer.optional_u32(settings.max_messages, "settings.max_messages")
    writer.optional_i64(settings.max_bytes, "settings.max_bytes")
    wire.write_code(writer, wire.OVERFLOW_CODES, settings.overflow, "settings.overflow")


def write_batch_ids(writer: wire.Writer, ids: tuple[tuple[int, ...], ...]) -> None:
    """Every message of a batch has one id per queue, so the width is said once."""
    width = len(ids[0]) if ids else 0
    if any(len(row) != width for row in ids):
        raise writer.fail("every message of a batch has one id per queue")
    writer.u16(len(ids), "len(messages)")
    writer.u16(width, "len(queue_ids)")
    for row in ids:
        for message_id in row:
            writer.i64(message_id, "ids[]")


def write_settled(writer: wire.Writer, settled: models.Settled) -> None:
    writer.i64(settled.delivery, "settled.delivery")
    writer.u8(settled.status, "settled.status")
    if settled.status:
        writer.name(fit_message(settled.message or ""), "settled.message")


def write_message(writer: wire.Writer, message: models.Message) -> None:
    """The Message layout, packed a few fields at a time (a batch writes thousands);
    a message that does not fit is written field by field, to name the field."""
    length = len(writer.buffer)
    try:
        write_message_packed(writer, message)
    except exceptions.EncodeError:
        del writer.buffer[length:]
        write_message_checked(writer, message)


def write_message_packed(writer: wire.Writer, message: models.Message) -> None:
    for field, value in (("receiver", message.receiver), ("delivery", message.delivery),
                         ("dead_from", message.dead_from)):  # fmt: skip
        if value is not None and value <= 0:
            raise writer.fail(f"message.{field}={value!r}: ids are positive")
    if not isinstance(message.body, bytes | bytearray):
        raise writer.fail(f"message.body must be bytes, not {type(message.body).__name__}")
    if message.failure == "":
        raise writer.fail("message.failure is empty (None for none)")
    failure = (message.failure or "").encode()
    try:
        micros = (message.created_at - wire.EPOCH) // wire.MICROSECOND
        head = MESSAGE_HEAD.pack(message.id, message.queue, message.sender,
                                 message.receiver or 0, message.context is not None)  # fmt: skip
        context = b"" if message.context is None else wire.I64.pack(message.context)
        middle = MESSAGE_MIDDLE.pack(message.priority, micros, len(message.body))
        tail = MESSAGE_TAIL.pack(message.delivery or 0, message.deliveries,
                                 message.dead_from or 0, len(failure))  # fmt: skip
    except (struct.error, TypeError) as exc:
        raise writer.fail(f"a field of message {message.id!r} does not fit ({exc})") from exc
    writer.buffer += head + context + middle
    writer.buffer += message.body
    if message.properties:
        writer.buffer += tail + failure
        writer.properties(message.properties, "message.properties")
    else:
        writer.buffer += tail + failure + wire.NO_PROPERTIES


def write_message_checked(writer: wire.Writer, message: models.Message) -> None:
    writer.i64(message.id, "message.id")
    writer.i64(message.queue, "message.queue")
    writer.i64(message.sender, "message.sender")
    writer.optional_id(message.receiver, "message.receiver")
    writer.optional_i64(message.context, "message.context")
    writer.u8(message.priority, "message.priority")
    writer.timestamp(message.created_at, "message.created_at")
    writer.blob(message.body, "message.body")
    writer.optional_id(message.delivery, "message.delivery")
    writer.u32(message.deliveries, "message.deliveries")
    writer.optional_id(message.dead_from, "message.dead_from")
    writer.optional_name(message.failure, "message.failure")
    writer.properties(message.properties, "message.properties")


def read_reply(reader: wire.Reader) -> frames.Reply:
    """Read a whole reply body; the opcode is the reader's (the request's)."""
    status = reader.status("status")
    if status is not errors.Status.OK:
        return frames.ErrorReply(status=status, message=reader.name("message"))
    read_payload = READERS.get(reader.opcode)
    if read_payload is None:
        raise exceptions.UnknownOpcode(reader.opcode)
    return read_payload(reader)


def read_client(reader: wire.Reader) -> models.ClientInfo:
    return models.ClientInfo(
        id=reader.i64("client.id"),
        name=reader.name("client.name"),
        mode=reader.mode("client.mode"),
        online=reader.boolean("client.online"),
    )


def read_queue(reader: wire.Reader) -> models.Queue:
    return models.Queue(
        id=reader.i64("queue.id"),
        name=reader.name("queue.name"),
        message_count=reader.i64("queue.message_count"),
    )


def read_queue_settings(reader: wire.Reader) -> models.QueueSettings:
    return models.QueueSettings(
        queue=reader.i64("settings.queue"),
        max_deliveries=reader.optional_u32("settings.max_deliveries"),
        dead_letter_queue=reader.optional_id("settings.dead_letter_queue"),
        dead_letter_expired=reader.boolean("settings.dead_letter_expired"),
        max_messages=reader.optional_u32("settings.max_messages"),
        max_bytes=reader.optional_i64("settings.max_bytes"),
        overflow=reader.overflow("settings.overflow"),
    )


def read_message(reader: wire.Reader) -> models.Message:
    """A few fields at a time (a batch reads thousands); a malformed message is read
    again field by field, to name the field."""
    start = reader.offset
    try:
        return read_message_packed(reader)
    except exceptions.MalformedBody:
        reader.offset = start
        return read_message_checked(reader)


def read_message_packed(reader: wire.Reader) -> models.Message:
    id_, queue, sender, receiver, has_context = reader.fields(MESSAGE_HEAD, "message")
    context = (
        reader.i64("message.context")
        if reader.as_boolean(has_context, "message.context presence")
        else None
    )
    priority, micros, size = reader.fields(MESSAGE_MIDDLE, "message")
    created_at = reader.as_timestamp(micros, "message.created_at")
    body = reader.take(size, "message.body")
    delivery, deliveries, dead_from, size = reader.fields(MESSAGE_TAIL, "message")
    failure = reader.text(reader.take(size, "message.failure"), "message.failure")
    offset = reader.offset
    if reader.body.startswith(wire.NO_PROPERTIES, offset):
        reader.offset = offset + 2
        properties: dict[str, models.PropertyValue] = {}
    else:
        properties = reader.properties("message.properties")
    # Positional, in the field order of models.Message: quicker than keywords.
    return models.Message(id_, queue, sender, receiver or None, context, priority, created_at,
                          body, delivery or None, deliveries, dead_from or None,
                          failure or None, properties)  # fmt: skip


def read_message_checked(reader: wire.Reader) -> models.Message:
    return models.Message(
        id=reader.i64("message.id"),
        queue=reader.i64("message.queue"),
        sender=reader.i64("message.sender"),
        receiver=reader.optional_id("message.receiver"),
        context=reader.optional_i64("message.context"),
        priority=reader.u8("message.priority"),
        created_at=reader.timestamp("message.created_at"),
        body=reader.blob("message.body"),
        delivery=reader.optional_id("message.delivery"),
        deliveries=reader.u32("message.deliveries"),
        dead_from=reader.optional_id("message.dead_from"),
        failure=reader.optional_name("message.failure"),
        properties=reader.properties("message.properties"),
    )


def read_settled(reader: wire.Reader) -> models.Settled:
    delivery = reader.i64("settled.delivery")
    status = reader.status("settled.status")
    if status is errors.Status.OK:
        return models.Settled(delivery)
    return models.Settled(delivery, status, reader.name("settled.message"))


def read_pong(reader: wire.Reader) -> frames.Pong:
    return frames.Pong(server_time_ns=reader.i64("server_time_ns"))


def read_client_reply(reader: wire.Reader) -> frames.ClientReply:
    return frames.ClientReply(client=read_client(reader))


def read_client_identity_reply(reader: wire.Reader) -> frames.ClientIdentityReply:
    identity = models.ClientIdentity(id=reader.i64("client.id"), name=reader.name("client.name"))
    return frames.ClientIdentityReply(client=identity)


def read_done(reader: wire.Reader) -> frames.Done:
    return frames.Done()


def read_login_challenge(reader: wire.Reader) -> frames.LoginChallenge:
    return frames.LoginChallenge(
        nonce=reader.name("nonce"), salt=reader.blob("salt"), iterations=reader.u32("iterations")
    )


def read_login_reply(reader: wire.Reader) -> frames.LoginReply:
    client = read_client(reader)
    return frames.LoginReply(client=client, server_signature=reader.blob("server_signature"))


def read_queue_reply(reader: wire.Reader) -> frames.QueueReply:
    return frames.QueueReply(queue=read_queue(reader))


def read_queue_list(reader: wire.Reader) -> frames.QueueListReply:
    count = reader.u32("len(queues)")
    return frames.QueueListReply(queues=tuple(read_queue(reader) for _ in range(count)))


def read_queue_settings_reply(reader: wire.Reader) -> frames.QueueSettingsReply:
    return frames.QueueSettingsReply(settings=read_queue_settings(reader))


def read_message_ids(reader: wire.Reader) -> frames.MessageIdsReply:
    count = reader.u16("len(ids)")
    return frames.MessageIdsReply(ids=tuple(reader.i64("ids[]") for _ in range(count)))


def read_message_reply(reader: wire.Reader) -> frames.MessageReply:
    return frames.MessageReply(message=read_message(reader))


def read_batch_ids(reader: wire.Reader) -> frames.BatchIdsReply:
    count, width = reader.u16("len(messages)"), reader.u16("len(queue_ids)")
    return frames.BatchIdsReply(
        ids=tuple(tuple(reader.i64("ids[]") for _ in range(width)) for _ in range(count))
    )


def read_messages_reply(reader: wire.Reader) -> frames.MessagesReply:
    count = reader.u16("len(messages)")
    return frames.MessagesReply(messages=tuple(read_message(reader) for _ in range(count)))


def read_settled_reply(reader: wire.Reader) -> frames.SettledReply:
    count = reader.u16("len(settled)")
    return frames.SettledReply(settled=tuple(read_settled(reader) for _ in range(count)))


def read_subscription(reader: wire.Reader) -> models.Subscription:
    return models.Subscription(
        queue=reader.i64("subscription.queue"),
        queue_name=reader.name("subscription.queue_name"),
        topic=reader.i64("subscription.topic"),
        name=reader.name("subscription.name"),
        durable=reader.boolean("subscription.durable"),
        subscriber=reader.i64("subscription.subscriber"),
        backlog=reader.i64("subscription.backlog"),
    )


def read_topic(reader: wire.Reader) -> models.Topic:
    topic_id, name = reader.i64("topic.id"), reader.name("topic.name")
    count = reader.u16("len(topic.subscriptions)")
    return models.Topic(topic_id, name, tuple(read_subscription(reader) for _ in range(count)))


def read_topic_reply(reader: wire.Reader) -> frames.TopicReply:
    return frames.TopicReply(topic=read_topic(reader))


def read_topic_list(reader: wire.Reader) -> frames.TopicListReply:
    count = reader.u32("len(topics)")
    return frames.TopicListReply(topics=tuple(read_topic(reader) for _ in range(count)))


def read_subscription_reply(reader: wire.Reader) -> frames.SubscriptionReply:
    return frames.SubscriptionReply(subscription=read_subscription(reader))


def read_publish_reply(reader: wire.Reader) -> frames.PublishReply:
    pairs = [(reader.i64("queue_ids[]"), reader.i64("message_ids[]"))
             for _ in range(reader.u16("len(copies)"))]  # fmt: skip
    return frames.PublishReply(
        queue_ids=tuple(queue for queue, _ in pairs), message_ids=tuple(m for _, m in pairs)
    )


def read_commit_reply(reader: wire.Reader) -> frames.CommitReply:
    def ids() -> tuple[int, ...]:
        return tuple(reader.i64("results[][]") for _ in range(reader.u16("len(results[])")))

    return frames.CommitReply(results=tuple(ids() for _ in range(reader.u16("len(results)"))))


PAYLOAD_READERS: dict[type[frames.Reply], Callable[[wire.Reader], frames.Reply]] = {
    frames.Pong: read_pong,
    frames.ClientReply: read_client_reply,
    frames.ClientIdentityReply: read_client_identity_reply,
    frames.Done: read_done,
    frames.LoginChallenge: read_login_challenge,
    frames.LoginReply: read_login_reply,
    frames.QueueReply: read_queue_reply,
    frames.QueueListReply: read_queue_list,
    frames.QueueSettingsReply: read_queue_settings_reply,
    frames.QueueAclReply: lambda reader: frames.QueueAclReply(requests.read_queue_acl(reader)),
    frames.MessageIdsReply: read_message_ids,
    frames.MessageReply: read_message_reply,
    frames.BatchIdsReply: read_batch_ids,
    frames.MessagesReply: read_messages_reply,
    frames.SettledReply: read_settled_reply,
    frames.TopicReply: read_topic_reply,
    frames.TopicListReply: read_topic_list,
    frames.SubscriptionReply: read_subscription_reply,
    frames.PublishReply: read_publish_reply,
    frames.CommitReply: read_commit_reply,
    **replicated.PAYLOAD_READERS,
}

READERS: dict[int, Callable[[wire.Reader], frames.Reply]] = {
    opcode: PAYLOAD_READERS[reply] for opcode, reply in frames.REPLY_TYPES.items()
}
"""How to read the payload of a successful reply to each opcode."""
