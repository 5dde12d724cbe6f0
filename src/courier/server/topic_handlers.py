"""The handlers of the topic opcodes (0x30-0x3F), one small function each.

They follow ``handlers``: identity from the session, one backend call, a typed
reply. A subscription is a queue, so reading it needs no handler of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from courier import errors
from courier.protocol import frames
from courier.protocol.constants import Opcode
from courier.server import backend

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from courier.server.handlers import Context


async def create_topic(ctx: Context, request: frames.CreateTopic) -> frames.TopicReply:
    creator = ctx.session.require_client().id
    topic = await ctx.services.backend.create_topic(
        request.name, creator=creator, timing=ctx.timing
    )
    return frames.TopicReply(topic)


async def delete_topic(ctx: Context, request: frames.DeleteTopic) -> frames.Done:
    actor = ctx.session.require_client().id  # its owner or an admin (the database checks)
    await ctx.services.backend.delete_topic(
        topic_key(request.topic_id, request.name), actor=actor, timing=ctx.timing
    )
    return frames.Done()


async def get_topic(ctx: Context, request: frames.GetTopic) -> frames.TopicReply:
    key = topic_key(request.topic_id, request.name)
    return frames.TopicReply(await ctx.services.backend.get_topic(key, timing=ctx.timing))


async def list_topics(ctx: Context, request: frames.ListTopics) -> frames.TopicListReply:
    return frames.TopicListReply(tuple(await ctx.services.backend.list_topics(timing=ctx.timing)))


async def subscribe(ctx: Context, request: frames.Subscribe) -> frames.SubscriptionReply:
    subscription = await ctx.services.backend.subscribe(
        ctx.session.require_client().id,
        topic_key(request.topic_id, request.topic_name),
        instance_id=ctx.services.instance_id,
        name=request.subscription,
        durable=request.durable,
        max_queues=ctx.services.limits.max_queues_per_client,
        timing=ctx.timing,
    )
    return frames.SubscriptionReply(subscription)


async def unsubscribe(ctx: Context, request: frames.Unsubscribe) -> frames.Done:
    actor = ctx.session.require_client().id  # the subscriber, the topic's owner or an admin
    await ctx.services.backend.unsubscribe(request.queue_id, actor=actor, timing=ctx.timing)
    return frames.Done()


async def publish(ctx: Context, request: frames.Publish) -> frames.PublishReply:
    sender = ctx.session.require_writer()
    limit = ctx.services.limits.max_body_bytes
    if len(request.body) > limit:  # before any database work, as for a send
        raise errors.PayloadTooLarge(size=len(request.body), limit=limit)
    copies = await ctx.services.backend.publish(
        sender.id,
        topic_key(request.topic_id, request.topic_name),
        request.body,
        receiver=request.receiver,
        priority=request.priority,
        context=request.context,
        options=backend.send_options(request),
        timing=ctx.timing,
    )
    ctx.services.due_in(request.delay_ms)
    ctx.services.due_in(request.ttl_ms)
    return frames.PublishReply(
        tuple(queue for queue, _ in copies), tuple(message for _, message in copies)
    )


def topic_key(topic_id: int | None, name: str | None) -> int | str:
    """A topic named by id or by name (the frame holds exactly one)."""
    key = topic_id if topic_id is not None else name
    if key is None:
        raise errors.BadRequest("name a topic by id or by name")
    return key


HANDLERS: dict[int, Callable[[Context, Any], Awaitable[frames.Reply]]] = {
    Opcode.CREATE_TOPIC: create_topic,
    Opcode.DELETE_TOPIC: delete_topic,
    Opcode.GET_TOPIC: get_topic,
    Opcode.LIST_TOPICS: list_topics,
    Opcode.SUBSCRIBE: subscribe,
    Opcode.UNSUBSCRIBE: unsubscribe,
    Opcode.PUBLISH: publish,
}
"""Opcode -> handler for the topic opcodes; part of ``handlers.HANDLERS``."""
