"""Replicated queues in the client: the methods of ``AsyncClient``, and the places of
producers and consumers.

A producer or consumer joins a replicated queue once and is given one member, an
ordinary queue on one node, for as long as its session lasts; what it sends or
reads goes to that member (docs/nodes.md). Order holds per member only.

    await admin.create_replicated_queue("orders", replicas=2)
    async with await client.producer("orders") as producer:
        await producer.send("order 1")
    async with await other.consumer("orders") as consumer:
        message = await consumer.receive(timeout=5)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Self, TypeVar

from courier import errors, models, protocol
from courier.client import session

if TYPE_CHECKING:
    from types import TracebackType

    from courier.client.async_client import AsyncClient

T = TypeVar("T")


class Place:
    """A producer's or consumer's member of a replicated queue; leave it (or use it
    as an async context manager) when done. ``queue`` is the member's queue. When the
    controller removes the member, the next call joins again and goes on there."""

    role = models.Role.PRODUCER

    def __init__(self, client: AsyncClient, name: str, place: models.Place) -> None:
        self.client = client
        self.name = name
        self.place = place

    @property
    def queue(self) -> int:
        return self.place.queue

    @property
    def member(self) -> int:
        return self.place.member

    async def on_member(self, call: Callable[[int], Awaitable[T]]) -> T:
        """``call`` with the member's queue id; once more on a new member if it is gone."""
        try:
            return await call(self.place.queue)
        except errors.QueueNotFound:
            self.place = await self.client._join(self.name, self.role)
            return await call(self.place.queue)

    async def leave(self) -> None:
        """Give the place up; the balancer then counts one client less there."""
        await self.client._session.call(protocol.LeaveReplicated(self.place.id), protocol.Done)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.leave()


class Producer(Place):
    role = models.Role.PRODUCER

    async def send(self, body: bytes | str, **options: Any) -> list[int]:
        """``AsyncClient.send`` to the member; the same options."""
        return await self.on_member(lambda queue: self.client.send(queue, body, **options))

    async def send_many(self, messages: Any, **options: Any) -> list[list[int]]:
        """``AsyncClient.send_many`` to the member."""
        return await self.on_member(lambda queue: self.client.send_many(queue, messages, **options))


class Consumer(Place):
    role = models.Role.CONSUMER

    async def receive(self, *, timeout: float, **options: Any) -> models.Message | None:
        """``AsyncClient.receive`` from the member."""
        return await self.on_member(
            lambda queue: self.client.receive(queue, timeout=timeout, **options)
        )

    async def pop(self, **options: Any) -> models.Message | None:
        """``AsyncClient.pop`` from the member."""
        return await self.on_member(lambda queue: self.client.pop(queue, **options))

    async def receive_many(self, **options: Any) -> list[models.Message]:
        """``AsyncClient.receive_many`` from the member."""
        return await self.on_member(lambda queue: self.client.receive_many(queue, **options))


class ReplicatedMethods:
    """Mixed into AsyncClient, which provides the session."""

    _session: session.Session

    async def create_replicated_queue(
        self, name: str, replicas: int, *, policy: models.Policy | str = models.Policy.BALANCED
    ) -> models.ReplicatedQueue:
        """Members ``name#1`` .. ``name#k`` on k distinct nodes. QueueExists;
        BadRequest when the cluster has fewer nodes than ``replicas``."""
        request = protocol.CreateReplicated(name, replicas, models.Policy(policy))
        return (await self._session.call(request, protocol.ReplicatedReply)).replicated

    async def get_replicated_queue(self, name: str) -> models.ReplicatedQueue:
        """Its members with their producers, consumers and lengths. QueueNotFound."""
        request = protocol.GetReplicated(name)
        return (await self._session.call(request, protocol.ReplicatedReply)).replicated

    async def delete_replicated_queue(self, name: str) -> None:
        """Its members and their messages go. QueueNotFound; NotAuthorised unless you
        created it or are an admin."""
        await self._session.call(protocol.DeleteReplicated(name), protocol.Done)

    async def producer(self, name: str) -> Producer:
        """Join the replicated queue as a producer: the balancer gives you a member."""
        return Producer(self._client(), name, await self._join(name, models.Role.PRODUCER))

    async def consumer(self, name: str) -> Consumer:
        """Join the replicated queue as a consumer: the balancer gives you a member."""
        return Consumer(self._client(), name, await self._join(name, models.Role.CONSUMER))

    async def _join(self, name: str, role: models.Role) -> models.Place:
        request = protocol.JoinReplicated(name, role)
        return (await self._session.call(request, protocol.PlaceReply)).place

    def _client(self) -> AsyncClient:
        from courier.client.async_client import AsyncClient

        assert isinstance(self, AsyncClient)
        return self
