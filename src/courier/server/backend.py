"""The narrow boundary between handlers and storage: typed request in, typed result out.

``Backend`` is the part of the repository's method set that handlers use, as a
protocol, so the batching ``courier.db.batching.BatchedRepository``, the plain
``courier.db.repository.Repository`` and the fixed-answer
``courier.db.mock.MockBackend`` (`courier serve --mock`) are interchangeable.
``Cluster`` adds what only a cluster of nodes can do (replicated queues); the
server's store is a ``courier.db.routing.RoutedBackend`` over the nodes' repositories,
or the mock. ``InstanceStore`` is what the instance registry needs. The database driver stays
behind this boundary: storage translates its failures into courier.errors, and a
database out of reach arrives here as Unavailable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from courier import errors, models, selectors
from courier.db import repository, transactions
from courier.protocol import frames

Timing = repository.Timing
SendOptions = repository.SendOptions
Lease = repository.Lease
Sweep = repository.Sweep


class Backend(Protocol):
    """What handlers call: one method per request kind."""

    async def register_client(
        self,
        name: str,
        mode: models.ClientMode = ...,
        *,
        verifier: models.Verifier | None = None,
        timing: Timing | None = None,
    ) -> models.ClientInfo: ...

    async def get_client(
        self, client: int | str, *, timing: Timing | None = None
    ) -> models.ClientInfo: ...

    async def auth_verifier(
        self, client: int | str, *, timing: Timing | None = None
    ) -> tuple[int, models.Verifier] | None: ...

    async def login_verified(
        self, client_id: int, instance_id: int, *, timing: Timing | None = None
    ) -> models.ClientInfo: ...

    async def set_secret(
        self, actor_id: int, client_id: int, verifier: models.Verifier, *,
        timing: Timing | None = None,
    ) -> None: ...  # fmt: skip

    async def set_client_enabled(
        self, actor_id: int, client_id: int, enabled: bool, *, timing: Timing | None = None
    ) -> None: ...

    async def login(
        self, client: int | str, instance_id: int, *, timing: Timing | None = None
    ) -> models.ClientInfo: ...

    async def logout(
        self, client_id: int, instance_id: int, *, timing: Timing | None = None
    ) -> None: ...

    async def create_queue(
        self,
        name: str,
        *,
        creator: int | None = None,
        max_queues: int | None = None,
        timing: Timing | None = None,
    ) -> models.Queue: ...

    async def delete_queue(
        self,
        queue_id: int,
        *,
        if_empty: bool = False,
        actor: int | None = None,
        timing: Timing | None = None,
    ) -> None: ...

    async def get_queue(
        self, queue: int | str, *, timing: Timing | None = None
    ) -> models.Queue: ...

    async def list_queues(self, *, timing: Timing | None = None) -> list[models.Queue]: ...

    async def send(
        self,
        sender_id: int,
        queue_ids: Sequence[int],
        body: bytes,
        *,
        receiver: int | None = None,
        priority: int = models.DEFAULT_PRIORITY,
        context: int | None = None,
        options: SendOptions = ...,
        timing: Timing | None = None,
    ) -> list[int]: ...

    async def read(
        self,
        reader_id: int,
        *,
        queue_id: int | None = None,
        sender_id: int | None = None,
        order: models.Order = models.Order.TIME,
        pop: bool = False,
        lease: Lease | None = None,
        selector: selectors.Compiled | None = None,
        timing: Timing | None = None,
    ) -> models.Message: ...

    async def pop_response(
        self, reader_id: int, queue_id: int, context: int, *, timing: Timing | None = None
    ) -> models.Message: ...

    async def watch_queue(
        self, queue_id: int, seconds: float, *, wait_ms: int = ..., timing: Timing | None = None
    ) -> bool:
        """Have what is stored in the queue announced for ``seconds`` at least, from
        before this returns (a waiter calls it before its last try); False if that
        could not be done in time."""
        ...

    async def send_many(
        self,
        sender_id: int,
        queue_ids: Sequence[int],
        drafts: Sequence[models.Draft],
        *,
        timing: Timing | None = None,
    ) -> list[list[int]]: ...

    async def pop_many(
        self,
        reader_id: int,
        queue_id: int,
        count: int,
        *,
        sender_id: int | None = None,
        order: models.Order = models.Order.TIME,
        lease: Lease | None = None,
        selector: selectors.Compiled | None = None,
        timing: Timing | None = None,
    ) -> list[models.Message]: ...

    async def ack_many(
        self, holder_id: int, delivery_ids: Sequence[int], *, timing: Timing | None = None
    ) -> list[models.Settled]: ...

    async def nack_many(
        self,
        holder_id: int,
        delivery_ids: Sequence[int],
        *,
        delay_ms: int = 0,
        reason: str | None = None,
        timing: Timing | None = None,
    ) -> list[models.Settled]: ...

    async def queues_for_me(
        self, reader_id: int, *, timing: Timing | None = None
    ) -> list[models.Queue]: ...

    async def ack(
        self, holder_id: int, delivery_id: int, *, timing: Timing | None = None
    ) -> None: ...

    async def nack(
        self,
        holder_id: int,
        delivery_id: int,
        *,
        delay_ms: int = 0,
        reason: str | None = None,
        timing: Timing | None = None,
    ) -> str: ...

    async def extend(
        self, holder_id: int, delivery_id: int, lease_ms: int, *, timing: Timing | None = None
    ) -> None: ...

    async def give_back(
        self, reader_id: int, message: models.Message, *, timing: Timing | None = None
    ) -> None: ...

    async def release_leases(
        self, holder_id: int, instance_id: int, *, timing: Timing | None = None
    ) -> int: ...

    async def configure_queue(
        self,
        settings: models.QueueSettings,
        *,
        actor: int | None = None,
        timing: Timing | None = None,
    ) -> models.QueueSettings: ...

    async def set_queue_acl(
        self, actor: int, acl: models.QueueAcl, *, timing: Timing | None = None
    ) -> models.QueueAcl: ...

    async def queue_acl(
        self, actor: int, queue_id: int, *, timing: Timing | None = None
    ) -> models.QueueAcl: ...

    async def sweep(self, limit: int, *, timing: Timing | None = None) -> Sweep: ...

    async def commit(
        self,
        client_id: int,
        operations: Sequence[transactions.Operation],
        *,
        timing: Timing | None = None,
    ) -> list[list[int]]: ...

    async def create_topic(
        self, name: str, *, creator: int | None = None, timing: Timing | None = None
    ) -> models.Topic: ...

    async def delete_topic(
        self, topic: int | str, *, actor: int | None = None, timing: Timing | None = None
    ) -> None: ...

    async def get_topic(
        self, topic: int | str, *, timing: Timing | None = None
    ) -> models.Topic: ...

    async def list_topics(self, *, timing: Timing | None = None) -> list[models.Topic]: ...

    async def subscribe(
        self,
        subscriber_id: int,
        topic: int | str,
        *,
        instance_id: int,
        name: str | None = None,
        durable: bool = True,
        max_queues: int | None = None,
        timing: Timing | None = None,
    ) -> models.Subscription: ...

    async def unsubscribe(
        self, queue_id: int, *, actor: int | None = None, timing: Timing | None = None
    ) -> None: ...

    async def publish(
        self,
        sender_id: int,
        topic: int | str,
        body: bytes,
        *,
        receiver: int | None = None,
        priority: int = models.DEFAULT_PRIORITY,
        context: int | None = None,
        options: SendOptions = ...,
        timing: Timing | None = None,
    ) -> list[tuple[int, int]]: ...


class Cluster(Backend, Protocol):
    """What handlers call on a cluster of nodes (``courier.db.routing.RoutedBackend``,
    or the mock): the storage methods, and replicated queues, whose members live on
    several nodes."""

    async def create_replicated_queue(
        self,
        name: str,
        replicas: int,
        *,
        policy: models.Policy = ...,
        creator: int | None = None,
        max_queues: int | None = None,
        timing: Timing | None = None,
    ) -> models.ReplicatedQueue: ...

    async def delete_replicated_queue(
        self, name: str, *, actor: int | None = None, timing: Timing | None = None
    ) -> None: ...

    async def get_replicated_queue(
        self, name: str, *, timing: Timing | None = None
    ) -> models.ReplicatedQueue: ...

    async def join_replicated(
        self,
        name: str,
        client_id: int,
        instance_id: int,
        role: models.Role,
        *,
        timing: Timing | None = None,
    ) -> models.Place: ...

    async def leave_replicated(
        self, place_id: int, client_id: int, *, timing: Timing | None = None
    ) -> bool: ...


class InstanceStore(Protocol):
    """What the instance registry calls."""

    async def register_instance(
        self, address: str, *, timing: Timing | None = None, ttl_seconds: float = ...
    ) -> models.Instance: ...

    async def heartbeat(self, instance_id: int, *, timing: Timing | None = None) -> None: ...

    async def expire_instances(self, *, timing: Timing | None = None) -> list[int]: ...

    async def reap_instances(
        self, instance_id: int, *, timing: Timing | None = None
    ) -> list[int]: ...

    async def unregister_instance(
        self, instance_id: int, *, timing: Timing | None = None
    ) -> None: ...


def is_outage(exc: BaseException) -> bool:
    """Whether a failure means the database is out of reach rather than a bug."""
    return isinstance(exc, errors.Unavailable)


def send_options(request: frames.Send | frames.Publish) -> SendOptions:
    """What a SEND or PUBLISH asks beyond storing its message (most ask nothing: they
    share one value)."""
    options = (request.delay_ms, request.ttl_ms, request.dedup_id, request.properties)
    if request.persistent and repository.asks_nothing(*options):
        return repository.PLAIN_SEND
    return SendOptions(*options, request.persistent)
