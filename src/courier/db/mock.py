"""The mock database tier: the repository's method set, answering without a database.

``courier serve --mock`` puts a ``MockBackend`` where the repository would be, so a
run measures the client and middleware alone. Every answer is fixed and valid; the
only thing derived from a request is an id derived from a name (a stable hash), so
that every client still gets its own id and the records of different clients stay
joinable on ``(client_id, request_id)``, even across several mock middleware.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime

from courier import models, selectors
from courier.db import repository, transactions

FIXED_TIME = datetime(2024, 1, 1, tzinfo=UTC)
FIXED_QUEUE_ID = 1
FIXED_MESSAGE_ID = 1
FIXED_DELIVERY_ID = 1
FIXED_BODY = b"courier mock message"


def stable_id(name: str) -> int:
    """A positive 62-bit id for a name, the same in every process."""
    digest = hashlib.blake2b(name.encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") >> 2) or 1


def _message(
    queue_id: int, sender_id: int, receiver: int | None = None, context: int | None = None
) -> models.Message:
    return models.Message(
        id=FIXED_MESSAGE_ID,
        queue=queue_id,
        sender=sender_id,
        receiver=receiver,
        context=context,
        priority=models.DEFAULT_PRIORITY,
        created_at=FIXED_TIME,
        body=FIXED_BODY,
    )


class MockBackend:
    """Fixed answers for every repository method; ``timing`` is left at zero."""

    async def register_client(
        self,
        name: str,
        mode: models.ClientMode = models.ClientMode.READ_WRITE,
        *,
        verifier: models.Verifier | None = None,
        timing: repository.Timing | None = None,
    ) -> models.ClientInfo:
        return models.ClientInfo(stable_id(name), name, mode)

    async def auth_verifier(
        self, client: int | str, *, timing: repository.Timing | None = None
    ) -> tuple[int, models.Verifier] | None:
        return None  # nobody has a secret: the mock tier runs with open login

    async def login_verified(
        self, client_id: int, instance_id: int, *, timing: repository.Timing | None = None
    ) -> models.ClientInfo:
        return self._client(client_id, online=True)

    async def set_secret(
        self, actor_id: int, client_id: int, verifier: models.Verifier, *,
        timing: repository.Timing | None = None,
    ) -> None:  # fmt: skip
        return None

    async def set_client_enabled(
        self, actor_id: int, client_id: int, enabled: bool, *,
        timing: repository.Timing | None = None,
    ) -> None:  # fmt: skip
        return None

    async def get_client(
        self, client: int | str, *, timing: repository.Timing | None = None
    ) -> models.ClientInfo:
        return self._client(client, online=False)

    async def login(
        self, client: int | str, instance_id: int, *, timing: repository.Timing | None = None
    ) -> models.ClientInfo:
        return self._client(client, online=True)

    async def logout(
        self, client_id: int, instance_id: int, *, timing: repository.Timing | None = None
    ) -> None:
        return None

    async def register_instance(
        self,
        address: str,
        *,
        timing: repository.Timing | None = None,
        ttl_seconds: float = 10.0,
    ) -> models.Instance:
        return models.Instance(stable_id(address), address, FIXED_TIME, FIXED_TIME)

    async def heartbeat(self, instance_id: int, *, timing: repository.Timing | None = None) -> None:
        return None

    async def list_instances(
        self, *, timing: repository.Timing | None = None
    ) -> list[models.Instance]:
        return []

    async def expire_instances(self, *, timing: repository.Timing | None = None) -> list[int]:
        return []

    async def reap_instances(
        self, instance_id: int, *, timing: repository.Timing | None = None
    ) -> list[int]:
        return []

    async def unregister_instance(
        self, instance_id: int, *, timing: repository.Timing | None = None
    ) -> None:
        return None

    async def create_queue(
        self,
        name: str,
        *,
        creator: int | None = None,
        max_queues: int | None = None,
        timing: repository.Timing | None = None,
    ) -> models.Queue:
        return models.Queue(stable_id(name), name)

    async def delete_queue(
        self, queue_id: int, *, if_empty: bool = False, actor: int | None = None,
        timing: repository.Timing | None = None,
    ) -> None:  # fmt: skip
        return None

    async def get_queue(
        self, queue: int | str, *, timing: repository.Timing | None = None
    ) -> models.Queue:
        if isinstance(queue, str):
            return models.Queue(stable_id(queue), queue)
        return models.Queue(queue, f"queue-{queue}")

    async def list_queues(self, *, timing: repository.Timing | None = None) -> list[models.Queue]:
        return [models.Queue(FIXED_QUEUE_ID, "mock", 1)]

    async def send(
        self,
        sender_id: int,
        queue_ids: Sequence[int],
        body: bytes,
        *,
        receiver: int | None = None,
        priority: int = models.DEFAULT_PRIORITY,
        context: int | None = None,
        options: repository.SendOptions = repository.PLAIN_SEND,
        timing: repository.Timing | None = None,
    ) -> list[int]:
        return list(range(FIXED_MESSAGE_ID, FIXED_MESSAGE_ID + len(queue_ids)))

    async def read(
        self,
        reader_id: int,
        *,
        queue_id: int | None = None,
        sender_id: int | None = None,
        order: models.Order = models.Order.TIME,
        pop: bool = False,
        lease: repository.Lease | None = None,
        selector: selectors.Compiled | None = None,
        timing: repository.Timing | None = None,
    ) -> models.Message:
        message = _message(queue_id or FIXED_QUEUE_ID, sender_id or reader_id)
        if lease is None:
            return message
        return dataclasses.replace(message, delivery=FIXED_DELIVERY_ID, deliveries=1)

    async def pop_response(
        self,
        reader_id: int,
        queue_id: int,
        context: int,
        *,
        timing: repository.Timing | None = None,
    ) -> models.Message:
        return _message(queue_id, reader_id, receiver=reader_id, context=context)

    async def watch_queue(
        self,
        queue_id: int,
        seconds: float,
        *,
        wait_ms: int = repository.WATCH_WAIT_MS,
        timing: repository.Timing | None = None,
    ) -> bool:
        return True

    async def queues_for_me(
        self, reader_id: int, *, timing: repository.Timing | None = None
    ) -> list[models.Queue]:
        return [models.Queue(FIXED_QUEUE_ID, "mock", 1)]

    async def ack(
        self, holder_id: int, delivery_id: int, *, timing: repository.Timing | None = None
    ) -> None:
        return None

    async def nack(
        self,
        holder_id: int,
        delivery_id: int,
        *,
        delay_ms: int = 0,
        reason: str | None = None,
        timing: repository.Timing | None = None,
    ) -> str:
        return "visible"

    async def send_many(
        self,
        sender_id: int,
        queue_ids: Sequence[int],
        drafts: Sequence[models.Draft],
        *,
        timing: repository.Timing | None = None,
    ) -> list[list[int]]:
        ids = list(range(FIXED_MESSAGE_ID, FIXED_MESSAGE_ID + len(queue_ids)))
        return [ids for _ in drafts]

    async def pop_many(
        self,
        reader_id: int,
        queue_id: int,
        count: int,
        *,
        sender_id: int | None = None,
        order: models.Order = models.Order.TIME,
        lease: repository.Lease | None = None,
        selector: selectors.Compiled | None = None,
        timing: repository.Timing | None = None,
    ) -> list[models.Message]:
        message = await self.read(reader_id, queue_id=queue_id, sender_id=sender_id, lease=lease)
        return [message] * count

    async def ack_many(
        self,
        holder_id: int,
        delivery_ids: Sequence[int],
        *,
        timing: repository.Timing | None = None,
    ) -> list[models.Settled]:
        return [models.Settled(delivery) for delivery in delivery_ids]

    async def nack_many(
        self,
        holder_id: int,
        delivery_ids: Sequence[int],
        *,
        delay_ms: int = 0,
        reason: str | None = None,
        timing: repository.Timing | None = None,
    ) -> list[models.Settled]:
        return [models.Settled(delivery) for delivery in delivery_ids]

    async def extend(
        self,
        holder_id: int,
        delivery_id: int,
        lease_ms: int,
        *,
        timing: repository.Timing | None = None,
    ) -> None:
        return None

    async def give_back(
        self, reader_id: int, message: models.Message, *, timing: repository.Timing | None = None
    ) -> None:
        return None

    async def release_leases(
        self, holder_id: int, instance_id: int, *, timing: repository.Timing | None = None
    ) -> int:
        return 0

    async def configure_queue(
        self, settings: models.QueueSettings, *, actor: int | None = None,
        timing: repository.Timing | None = None,
    ) -> models.QueueSettings:  # fmt: skip
        return settings

    async def set_queue_acl(
        self, actor: int, acl: models.QueueAcl, *, timing: repository.Timing | None = None
    ) -> models.QueueAcl:
        return acl

    async def queue_acl(
        self, actor: int, queue_id: int, *, timing: repository.Timing | None = None
    ) -> models.QueueAcl:
        return models.QueueAcl(queue_id)

    async def sweep(
        self, limit: int, *, timing: repository.Timing | None = None
    ) -> repository.Sweep:
        return repository.Sweep(0, 0, None)

    @staticmethod
    def _client(client: int | str, *, online: bool) -> models.ClientInfo:
        if isinstance(client, str):
            return models.ClientInfo(
                stable_id(client), client, models.ClientMode.READ_WRITE, online
            )
        return models.ClientInfo(client, f"client-{client}", models.ClientMode.READ_WRITE, online)

    async def commit(
        self,
        client_id: int,
        operations: Sequence[transactions.Operation],
        *,
        timing: repository.Timing | None = None,
    ) -> list[list[int]]:
        return [
            [] if isinstance(operation, transactions.AckOperation) else [FIXED_MESSAGE_ID]
            for operation in operations
        ]

    # -- topics: one fixed subscription whose queue is the fixed queue ---------------

    async def create_replicated_queue(
        self,
        name: str,
        replicas: int,
        *,
        policy: models.Policy = models.Policy.BALANCED,
        creator: int | None = None,
        max_queues: int | None = None,
        timing: repository.Timing | None = None,
    ) -> models.ReplicatedQueue:
        return _replicated(name, replicas, policy)

    async def delete_replicated_queue(
        self, name: str, *, actor: int | None = None, timing: repository.Timing | None = None
    ) -> None:
        return None

    async def get_replicated_queue(
        self, name: str, *, timing: repository.Timing | None = None
    ) -> models.ReplicatedQueue:
        return _replicated(name, 2, models.Policy.BALANCED)

    async def join_replicated(
        self,
        name: str,
        client_id: int,
        instance_id: int,
        role: models.Role,
        *,
        timing: repository.Timing | None = None,
    ) -> models.Place:
        member = _replicated(name, 2, models.Policy.BALANCED).members[client_id % 2]
        return models.Place(client_id, member.member, member.queue, member.queue_name, 2)

    async def leave_replicated(
        self, place_id: int, client_id: int, *, timing: repository.Timing | None = None
    ) -> bool:
        return True

    async def create_topic(
        self, name: str, *, creator: int | None = None, timing: repository.Timing | None = None
    ) -> models.Topic:
        return models.Topic(stable_id(name), name)

    async def delete_topic(
        self, topic: int | str, *, actor: int | None = None,
        timing: repository.Timing | None = None,
    ) -> None:  # fmt: skip
        return None

    async def get_topic(
        self, topic: int | str, *, timing: repository.Timing | None = None
    ) -> models.Topic:
        topic_id, name = _topic_key(topic)
        return models.Topic(topic_id, name, (_subscription(topic_id, name),))

    async def list_topics(self, *, timing: repository.Timing | None = None) -> list[models.Topic]:
        return [await self.get_topic("mock")]

    async def subscribe(
        self,
        subscriber_id: int,
        topic: int | str,
        *,
        instance_id: int,
        name: str | None = None,
        durable: bool = True,
        max_queues: int | None = None,
        timing: repository.Timing | None = None,
    ) -> models.Subscription:
        topic_id, topic_name = _topic_key(topic)
        subscription = _subscription(topic_id, topic_name, name or "mock")
        return dataclasses.replace(subscription, durable=durable, subscriber=subscriber_id)

    async def unsubscribe(
        self, queue_id: int, *, actor: int | None = None,
        timing: repository.Timing | None = None,
    ) -> None:  # fmt: skip
        return None

    async def publish(
        self,
        sender_id: int,
        topic: int | str,
        body: bytes,
        *,
        receiver: int | None = None,
        priority: int = models.DEFAULT_PRIORITY,
        context: int | None = None,
        options: repository.SendOptions = repository.PLAIN_SEND,
        timing: repository.Timing | None = None,
    ) -> list[tuple[int, int]]:
        return [(FIXED_QUEUE_ID, FIXED_MESSAGE_ID)]


def _topic_key(topic: int | str) -> tuple[int, str]:
    if isinstance(topic, str):
        return stable_id(topic), topic
    return topic, f"topic-{topic}"


def _subscription(topic_id: int, topic_name: str, name: str = "mock") -> models.Subscription:
    return models.Subscription(
        FIXED_QUEUE_ID, f"{topic_name}:{name}", topic_id, name, True, FIXED_QUEUE_ID
    )


def _replicated(name: str, replicas: int, policy: models.Policy) -> models.ReplicatedQueue:
    """Members ``name#1`` .. on nodes 1 ..., each a stable queue id."""
    members = tuple(
        models.Replica(n, stable_id(f"{name}#{n}"), f"{name}#{n}", n)
        for n in range(1, replicas + 1)
    )
    return models.ReplicatedQueue(stable_id(name), name, policy, members)
