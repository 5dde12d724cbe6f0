"""Hypothesis strategies for every Courier frame type (shared by the protocol tests)."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import strategies as st

from courier import errors, models, protocol

Frame = tuple[int, protocol.Request | protocol.Reply, int | None]
"""(request_id, message, opcode to pass to encode)."""

ids = st.integers(min_value=1, max_value=2**63 - 1)
optional_ids = st.none() | ids
i64s = st.integers(min_value=-(2**63), max_value=2**63 - 1)
u8s = st.integers(min_value=0, max_value=255)
u32s = st.integers(min_value=0, max_value=2**32 - 1)
optional_u32s = st.none() | st.integers(min_value=1, max_value=2**32 - 1)  # 0 means none
names = st.text(max_size=24)
optional_names = st.none() | st.text(min_size=1, max_size=24)  # empty means none
bodies = st.binary(max_size=300)  # opaque: NUL, invalid UTF-8, anything
modes = st.sampled_from(models.ClientMode)
orders = st.sampled_from(models.Order)
request_ids = u32s
property_text = st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",))
property_values = st.one_of(
    st.text(property_text, max_size=24),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
)
property_maps = st.dictionaries(
    st.text(property_text, min_size=1, max_size=12),
    property_values,
    max_size=4,
)  # text keys (never empty) to typed values; text without NUL (Courier cannot store it)
times = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
)

queues = st.builds(models.Queue, id=ids, name=names, message_count=i64s)
clients = st.builds(models.ClientInfo, id=ids, name=names, mode=modes, online=st.booleans())
identities = st.builds(models.ClientIdentity, id=ids, name=names)
settings = st.builds(
    models.QueueSettings,
    queue=ids,
    max_deliveries=optional_u32s,
    dead_letter_queue=optional_ids,
    dead_letter_expired=st.booleans(),
)
messages = st.builds(
    models.Message,
    id=ids,
    queue=ids,
    sender=ids,
    receiver=optional_ids,
    context=st.none() | i64s,
    priority=u8s,
    created_at=times,
    body=bodies,
    delivery=optional_ids,
    deliveries=u32s,
    dead_from=optional_ids,
    failure=optional_names,
    properties=property_maps,
)

requests: st.SearchStrategy[protocol.Request] = st.one_of(
    st.just(protocol.Ping()),
    st.builds(protocol.Register, name=names, mode=modes),
    st.builds(protocol.Login, client_id=ids, name=st.none()),
    st.builds(protocol.Login, client_id=st.none(), name=names),
    st.just(protocol.Logout()),
    st.builds(protocol.Cancel, request_id=request_ids),
    st.builds(protocol.GetClient, client_id=ids, name=st.none()),
    st.builds(protocol.GetClient, client_id=st.none(), name=names),
    st.builds(protocol.CreateQueue, name=names),
    st.builds(protocol.DeleteQueue, queue_id=ids, if_empty=st.booleans()),
    st.builds(protocol.GetQueue, queue_id=ids, name=st.none()),
    st.builds(protocol.GetQueue, queue_id=st.none(), name=names),
    st.just(protocol.ListQueues()),
    st.builds(
        protocol.ConfigureQueue,
        queue_id=ids,
        max_deliveries=optional_u32s,
        dead_letter_queue=optional_ids,
        dead_letter_expired=st.booleans(),
    ),
    st.builds(
        protocol.Send,
        queue_ids=st.lists(ids, max_size=5).map(tuple),
        body=bodies,
        receiver=optional_ids,
        priority=u8s,
        context=st.none() | i64s,
        delay_ms=u32s,
        ttl_ms=optional_u32s,
        dedup_id=optional_names,
        properties=property_maps,
        persistent=st.booleans(),
    ),
    st.builds(
        protocol.Read,
        queue_id=optional_ids,
        sender_id=optional_ids,
        order=orders,
        pop=st.booleans(),
        lease_ms=u32s,
        selector=optional_names,
    ),
    st.builds(
        protocol.Receive,
        queue_id=ids,
        sender_id=optional_ids,
        order=orders,
        timeout_ms=u32s,
        lease_ms=u32s,
        selector=optional_names,
    ),
    st.builds(
        protocol.ReceiveMany,
        queue_id=ids,
        sender_id=optional_ids,
        order=orders,
        max_messages=st.integers(0, 1000),
        timeout_ms=u32s,
        lease_ms=u32s,
        min_messages=st.integers(0, 1000),
        max_wait_ms=u32s,
        selector=optional_names,
    ),
    st.builds(protocol.AwaitResponse, queue_id=ids, context=i64s, timeout_ms=u32s),
    st.just(protocol.QueuesForMe()),
    st.builds(protocol.Ack, delivery_id=ids),
    st.builds(protocol.Nack, delivery_id=ids, delay_ms=u32s, reason=optional_names),
    st.builds(protocol.Extend, delivery_id=ids, lease_ms=u32s),
)

publishes = st.builds(
    protocol.Publish,
    topic_id=st.none(),
    topic_name=st.text(max_size=24),
    body=bodies,
    receiver=optional_ids,
    priority=u8s,
    context=st.none() | i64s,
    delay_ms=u32s,
    ttl_ms=optional_u32s,
    dedup_id=optional_names,
    persistent=st.booleans(),
) | st.builds(
    protocol.Publish,
    topic_id=ids,
    topic_name=st.none(),
    body=bodies,
    receiver=optional_ids,
    priority=u8s,
    context=st.none() | i64s,
)
sends = st.builds(
    protocol.Send,
    queue_ids=st.lists(ids, max_size=3).map(tuple),
    body=bodies,
    receiver=optional_ids,
    priority=u8s,
    context=st.none() | i64s,
    persistent=st.booleans(),
)
topic_requests: st.SearchStrategy[protocol.Request] = st.one_of(
    st.builds(protocol.CreateTopic, name=names),
    st.builds(protocol.DeleteTopic, topic_id=ids, name=st.none()),
    st.builds(protocol.GetTopic, topic_id=st.none(), name=names),
    st.just(protocol.ListTopics()),
    st.builds(
        protocol.Subscribe,
        topic_id=st.none(),
        topic_name=names,
        subscription=optional_names,
        durable=st.booleans(),
    ),
    st.builds(protocol.Unsubscribe, queue_id=ids),
    publishes,
    st.builds(
        protocol.Commit,
        age_ms=u32s,
        operations=st.lists(
            sends | publishes | st.builds(protocol.Ack, delivery_id=ids), max_size=4
        ).map(tuple),
    ),
)
requests = st.one_of(requests, topic_requests)

error_statuses = st.sampled_from([s for s in errors.Status if s is not errors.Status.OK])

typed_replies: st.SearchStrategy[protocol.Reply] = st.one_of(
    st.builds(protocol.Pong, server_time_ns=i64s),
    st.builds(protocol.ClientReply, client=clients),
    st.builds(protocol.ClientIdentityReply, client=identities),
    st.just(protocol.Done()),
    st.builds(protocol.QueueReply, queue=queues),
    st.builds(protocol.QueueListReply, queues=st.lists(queues, max_size=5).map(tuple)),
    st.builds(protocol.QueueSettingsReply, settings=settings),
    st.builds(protocol.MessageIdsReply, ids=st.lists(ids, max_size=5).map(tuple)),
    st.builds(protocol.MessageReply, message=messages),
)

subscriptions = st.builds(
    models.Subscription,
    queue=ids,
    queue_name=names,
    topic=ids,
    name=names,
    durable=st.booleans(),
    subscriber=ids,
    backlog=i64s,
)
topics = st.builds(
    models.Topic, id=ids, name=names, subscriptions=st.lists(subscriptions, max_size=3).map(tuple)
)
copies = st.lists(st.tuples(ids, ids), max_size=4)
typed_replies = st.one_of(
    typed_replies,
    st.builds(protocol.TopicReply, topic=topics),
    st.builds(protocol.TopicListReply, topics=st.lists(topics, max_size=3).map(tuple)),
    st.builds(protocol.SubscriptionReply, subscription=subscriptions),
    copies.map(
        lambda pairs: protocol.PublishReply(tuple(q for q, _ in pairs), tuple(m for _, m in pairs))
    ),
    st.builds(
        protocol.CommitReply,
        results=st.lists(st.lists(ids, max_size=3).map(tuple), max_size=4).map(tuple),
    ),
)


@st.composite
def replies(draw: st.DrawFn) -> tuple[protocol.Reply, int]:
    """A reply and the opcode of a request it may answer."""
    if draw(st.booleans()):
        failure = draw(st.builds(protocol.ErrorReply, status=error_statuses, message=names))
        return failure, draw(u8s)  # any opcode, even an unknown one, may get an error
    success = draw(typed_replies)
    answered = [op for op, kind in protocol.REPLY_TYPES.items() if kind is type(success)]
    return success, draw(st.sampled_from(answered))


@st.composite
def frames(draw: st.DrawFn) -> Frame:
    """(request_id, message, opcode for encode) for a request or a reply."""
    request_id = draw(request_ids)
    if draw(st.booleans()):
        return request_id, draw(requests), None
    reply, opcode = draw(replies())
    return request_id, reply, opcode
