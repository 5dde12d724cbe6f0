"""Publish/subscribe in the client: the topic methods of ``AsyncClient``.

A subscription is a queue: read it with ``receive``, ``pop``, ``receive_many`` and
acknowledge with ``ack``, passing the ``Subscription`` (or its ``queue`` id or
``queue_name``) where a queue goes.

    news = await client.create_topic("news")
    mine = await client.subscribe("news")                # durable, named after me
    await client.publish("news", "hello")                # a copy per subscription
    message = await client.receive(mine, timeout=5)
"""

from __future__ import annotations

from datetime import datetime
from typing import TypeAlias

from courier import models, protocol
from courier.client import arguments, client_refs, session

TopicRef: TypeAlias = int | str | models.Topic
"""A topic by id (int), by name (str) or as returned by the client (Topic)."""


def lookup(topic: TopicRef) -> tuple[int | None, str | None]:
    """The (id, name) pair a frame carries, exactly one of them given."""
    if isinstance(topic, models.Topic):
        return topic.id, None
    if isinstance(topic, str):
        return None, topic
    return topic, None


class TopicMethods:
    """Mixed into AsyncClient, which provides the session and the client names."""

    _session: session.Session
    _clients: client_refs.ClientNames

    async def create_topic(self, name: str) -> models.Topic:
        """TopicExists if the name is taken."""
        reply = await self._session.call(protocol.CreateTopic(name=name), protocol.TopicReply)
        return reply.topic

    async def delete_topic(self, topic: TopicRef) -> None:
        """Delete the topic, its subscriptions, their queues and what they hold.
        TopicNotFound; NotAuthorised unless you created the topic or are an admin."""
        await self._session.call(protocol.DeleteTopic(*lookup(topic)), protocol.Done)

    async def get_topic(self, topic: TopicRef) -> models.Topic:
        """The topic with its subscriptions and their backlogs. TopicNotFound."""
        return (
            await self._session.call(protocol.GetTopic(*lookup(topic)), protocol.TopicReply)
        ).topic

    async def list_topics(self) -> list[models.Topic]:
        """Every topic, ordered by id, with its subscriptions and their backlogs."""
        reply = await self._session.call(protocol.ListTopics(), protocol.TopicListReply)
        return list(reply.topics)

    async def subscribe(
        self, topic: TopicRef, *, durable: bool = True, name: str | None = None
    ) -> models.Subscription:
        """Subscribe: from now on every message published to the topic gets a copy in
        the subscription's own queue, read like any queue.

        A durable subscription keeps collecting while you are away; its ``name``
        defaults to yours, and subscribing durably again under an existing durable
        name resumes that subscription. A non-durable one (``durable=False``; the
        server names it when ``name`` is None) ends, with its queue, when this
        connection's session does (logout, a lost connection, a failover, or its
        server's end). TopicNotFound; QueueExists when the name is taken otherwise;
        NotAuthorised when the durable subscription of that name is another client's.
        """
        request = protocol.Subscribe(*lookup(topic), subscription=name, durable=durable)
        return (await self._session.call(request, protocol.SubscriptionReply)).subscription

    async def unsubscribe(self, subscription: models.Subscription | int) -> None:
        """End a subscription (or the one whose queue id this is), deleting its queue
        and what it holds. QueueNotFound when it is no subscription (any more);
        NotAuthorised unless it is yours, you created its topic or you are an admin."""
        queue_id = (
            subscription.queue if isinstance(subscription, models.Subscription) else subscription
        )
        await self._session.call(protocol.Unsubscribe(queue_id=queue_id), protocol.Done)

    async def publish(
        self,
        topic: TopicRef,
        body: bytes | str,
        *,
        receiver: client_refs.ClientRef | None = None,
        priority: int = models.DEFAULT_PRIORITY,
        context: int | None = None,
        delay: float | None = None,
        not_before: datetime | None = None,
        ttl: float | None = None,
        dedup_id: str | None = None,
        properties: models.Properties | None = None,
        persistent: bool = True,
    ) -> dict[int, int]:
        """Store a copy of the message in every subscription of the topic, all or none.

        Returns the message id of each copy by its subscription's queue id: empty when
        the topic has no subscription (nothing is stored). The options are those of
        ``send``, ``receiver`` (an id or a name), ``properties`` and ``persistent``
        included (every copy carries them); a subscription queue that refuses the
        message (full, say) fails the whole publish and no copy is stored. TopicNotFound.
        """
        if isinstance(receiver, str):  # an id costs no await
            receiver = await self._clients.id(receiver)
        fields = arguments.message_fields(
            body, receiver=receiver, priority=priority, context=context, delay=delay,
            not_before=not_before, ttl=ttl, dedup_id=dedup_id, properties=properties,
            persistent=persistent,
        )  # fmt: skip
        request = protocol.Publish(*lookup(topic), **fields)
        reply = await self._session.call(request, protocol.PublishReply)
        return dict(zip(reply.queue_ids, reply.message_ids, strict=True))
