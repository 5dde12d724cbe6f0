"""The Backend of a cluster of nodes: each request goes to the node that holds it.

A queue lives on one node, and its id names that node (``nodes.node_of``), so a
request for a queue, a message or a delivery goes straight to its node's backend.
Clients, sessions and topics stay on the control node (node 1). What spans nodes
is refused with BadRequest, never done half: a send or a transaction over queues
on different nodes, or a dead-letter queue on another node than its queue. Reads
that name no queue and listings ask every node. With one node everything goes to
it unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar

from courier import errors, models, selectors
from courier.db import nodes, repository, transactions

Timing = repository.Timing
Lease = repository.Lease
SendOptions = repository.SendOptions
Sweep = repository.Sweep

log = logging.getLogger(__name__)

T = TypeVar("T")


class RoutedBackend:
    """Routes every Backend call to its node; see the module docstring. Each node's
    backend is a plain or a batched repository (``Any`` here: the mock has no nodes)."""

    def __init__(self, control: Any, service_s: float = 0.0) -> None:
        self.control: Any = control
        self._service_s = service_s
        self._nodes: dict[int, Any] = {nodes.CONTROL_NODE: self._paced(control)}
        self.members: frozenset[int] = frozenset()
        """The member queues of replicated queues, whose traffic is counted."""
        self._counts: dict[int, list[int]] = {}  # member queue id -> [sent, taken]
        self._reported: dict[int, tuple[int, int]] = {}

    # -- the nodes -------------------------------------------------------------
    @property
    def node_ids(self) -> list[int]:
        return sorted(self._nodes)

    def attach(self, node_id: int, backend: Any) -> None:
        self._nodes[node_id] = self._paced(backend)

    def detach(self, node_id: int) -> Any:
        found = self._nodes.pop(node_id, None)
        return found.backend if isinstance(found, Paced) else found

    def _paced(self, backend: Any) -> Any:
        return Paced(backend, self._service_s) if self._service_s > 0 else backend

    def node(self, node_id: int) -> Any:
        """Unavailable for a node not linked (yet); an id no node can hand out names
        nothing (QueueNotFound)."""
        try:
            return self._nodes[node_id]
        except KeyError:
            if not 1 <= node_id <= nodes.MAX_NODES:
                raise errors.QueueNotFound(f"no node hands out ids of node {node_id}") from None
            raise errors.Unavailable(
                f"node {node_id} is not reachable from this middleware"
            ) from None

    def _for(self, object_id: int) -> Any:
        return self.node(nodes.node_of(object_id))

    def _others(self) -> list[Any]:
        return [backend for node_id, backend in sorted(self._nodes.items()) if node_id != 1]

    def _one_node(self, ids: Iterable[int], what: str) -> int:
        found = {nodes.node_of(object_id) for object_id in ids}
        if len(found) > 1:
            raise errors.BadRequest(
                f"{what} spans nodes {', '.join(map(str, sorted(found)))}; "
                "each request may only touch queues of one node"
            )
        return found.pop() if found else nodes.CONTROL_NODE

    async def _everywhere(self, call: Callable[[Any], Awaitable[T]]) -> list[T]:
        backends = [backend for _, backend in sorted(self._nodes.items())]
        if len(backends) == 1:
            return [await call(backends[0])]
        return list(await asyncio.gather(*(call(backend) for backend in backends)))

    # -- traffic of member queues, for the controller's rates --------------------
    def _count(self, queue_id: int, sent: int = 0, taken: int = 0) -> None:
        if queue_id in self.members:
            counts = self._counts.setdefault(queue_id, [0, 0])
            counts[0] += sent
            counts[1] += taken

    async def watch_members(self) -> None:
        """Learn which queues are members now (they come and go with the controller)."""
        self.members = frozenset(await self.control.member_queues())
        for gone in set(self._counts) - self.members:
            del self._counts[gone]

    async def report_counts(self, instance_id: int) -> None:
        """Tell the control node this middleware's running totals, when they moved."""
        totals = {queue: (sent, taken) for queue, (sent, taken) in self._counts.items()}
        if totals and totals != self._reported:
            await self.control.report_counts(instance_id, totals)
            self._reported = totals

    # -- clients: the control node, copied to the others at login --------------
    async def register_client(
        self,
        name: str,
        mode: models.ClientMode = models.ClientMode.READ_WRITE,
        *,
        verifier: models.Verifier | None = None,
        timing: Timing | None = None,
    ) -> models.ClientInfo:
        client: models.ClientInfo = await self.control.register_client(
            name, mode, verifier=verifier, timing=timing
        )
        await self._adopt(client)
        return client

    async def get_client(
        self, client: int | str, *, timing: Timing | None = None
    ) -> models.ClientInfo:
        found: models.ClientInfo = await self.control.get_client(client, timing=timing)
        return found

    async def auth_verifier(
        self, client: int | str, *, timing: Timing | None = None
    ) -> tuple[int, models.Verifier] | None:
        found: tuple[int, models.Verifier] | None = await self.control.auth_verifier(
            client, timing=timing
        )
        return found

    async def login_verified(
        self, client_id: int, instance_id: int, *, timing: Timing | None = None
    ) -> models.ClientInfo:
        client = await self.control.login_verified(client_id, instance_id, timing=timing)
        await self._adopt(client)
        return client  # type: ignore[no-any-return]

    async def set_secret(
        self, actor_id: int, client_id: int, verifier: models.Verifier, *,
        timing: Timing | None = None,
    ) -> None:  # fmt: skip
        await self.control.set_secret(actor_id, client_id, verifier, timing=timing)

    async def set_client_enabled(
        self, actor_id: int, client_id: int, enabled: bool, *, timing: Timing | None = None
    ) -> None:
        await self.control.set_client_enabled(actor_id, client_id, enabled, timing=timing)

    async def login(
        self, client: int | str, instance_id: int, *, timing: Timing | None = None
    ) -> models.ClientInfo:
        found = await self.control.login(client, instance_id, timing=timing)
        await self._adopt(found)
        return found  # type: ignore[no-any-return]

    async def logout(
        self, client_id: int, instance_id: int, *, timing: Timing | None = None
    ) -> None:
        await self.control.logout(client_id, instance_id, timing=timing)

    async def _adopt(self, client: models.ClientInfo) -> None:
        """Every node keeps a copy of each client its messages name (for their
        foreign keys): made at registration and brought up to date at each login."""
        others = self._others()
        if not others:
            return
        done = await asyncio.gather(
            *(backend.adopt_client(client) for backend in others), return_exceptions=True
        )
        for failed in (result for result in done if isinstance(result, BaseException)):
            if not isinstance(failed, errors.CourierError):
                raise failed
            # That node copies every client again when a middleware links it anew.
            log.warning("cannot copy client %d to a node: %s", client.id, failed)

    # -- queues ----------------------------------------------------------------
    async def create_queue(
        self,
        name: str,
        *,
        creator: int | None = None,
        max_queues: int | None = None,
        timing: Timing | None = None,
    ) -> models.Queue:
        node_id = await self.control.place_queue() if self._others() else nodes.CONTROL_NODE
        return await self.create_queue_on(node_id, name, creator, max_queues, timing)

    async def create_queue_on(
        self,
        node_id: int,
        name: str,
        creator: int | None = None,
        max_queues: int | None = None,
        timing: Timing | None = None,
    ) -> models.Queue:
        """A queue on that node; QueueExists when the name is taken anywhere."""
        if node_id == nodes.CONTROL_NODE:  # the queue's own insert claims its name
            return await self.control.create_queue(  # type: ignore[no-any-return]
                name, creator=creator, max_queues=max_queues, timing=timing
            )
        target = self.node(node_id)
        await self.control.reserve_queue_home(name, node_id)
        try:
            created: models.Queue = await target.create_queue(
                name, creator=creator, max_queues=max_queues, timing=timing
            )
        except errors.CourierError as exc:
            # Refused: the name is free again. Out of reach: the create may have
            # committed, so the name stays claimed rather than be taken twice.
            if not isinstance(exc, errors.Unavailable):
                await self.control.release_queue_home(name, node_id)
            raise
        return created

    async def delete_queue(
        self,
        queue_id: int,
        *,
        if_empty: bool = False,
        actor: int | None = None,
        timing: Timing | None = None,
    ) -> None:
        node_id = nodes.node_of(queue_id)
        target = self.node(node_id)
        if node_id == nodes.CONTROL_NODE:
            await target.delete_queue(queue_id, if_empty=if_empty, actor=actor, timing=timing)
            return
        queue = await target.get_queue(queue_id)
        await target.delete_queue(queue_id, if_empty=if_empty, actor=actor, timing=timing)
        await self.control.release_queue_home(queue.name, node_id)

    async def get_queue(self, queue: int | str, *, timing: Timing | None = None) -> models.Queue:
        if isinstance(queue, int):
            return await self._for(queue).get_queue(queue, timing=timing)  # type: ignore[no-any-return]
        home = await self.control.queue_home(queue) if self._others() else None
        target = self.node(home) if home is not None else self.control
        return await target.get_queue(queue, timing=timing)  # type: ignore[no-any-return]

    async def list_queues(self, *, timing: Timing | None = None) -> list[models.Queue]:
        found = await self._everywhere(lambda backend: backend.list_queues(timing=timing))
        return sorted((queue for listed in found for queue in listed), key=lambda q: q.id)

    async def queues_for_me(
        self, reader_id: int, *, timing: Timing | None = None
    ) -> list[models.Queue]:
        found = await self._everywhere(
            lambda backend: backend.queues_for_me(reader_id, timing=timing)
        )
        return sorted((queue for listed in found for queue in listed), key=lambda q: q.id)

    async def configure_queue(
        self,
        settings: models.QueueSettings,
        *,
        actor: int | None = None,
        timing: Timing | None = None,
    ) -> models.QueueSettings:
        touched = [settings.queue]
        if settings.dead_letter_queue is not None:
            touched.append(settings.dead_letter_queue)
        node_id = self._one_node(touched, "a queue and its dead-letter queue")
        return await self.node(node_id).configure_queue(  # type: ignore[no-any-return]
            settings, actor=actor, timing=timing
        )

    async def set_queue_acl(
        self, actor: int, acl: models.QueueAcl, *, timing: Timing | None = None
    ) -> models.QueueAcl:
        return await self._for(acl.queue).set_queue_acl(actor, acl, timing=timing)  # type: ignore[no-any-return]

    async def queue_acl(
        self, actor: int, queue_id: int, *, timing: Timing | None = None
    ) -> models.QueueAcl:
        return await self._for(queue_id).queue_acl(actor, queue_id, timing=timing)  # type: ignore[no-any-return]

    # -- replicated queues: members on distinct nodes, places on the control node --
    async def create_replicated_queue(
        self,
        name: str,
        replicas: int,
        *,
        policy: models.Policy = models.Policy.BALANCED,
        creator: int | None = None,
        max_queues: int | None = None,
        timing: Timing | None = None,
    ) -> models.ReplicatedQueue:
        """Members ``name#1`` .. ``name#k`` on the k nodes holding the fewest queues (the
        controller keeps at least k). QueueExists; BadRequest when the cluster has
        fewer than k nodes."""
        node_ids = await self.control.place_replicas(replicas, timing=timing)
        replicated_id = await self.control.create_replicated(name, policy, creator, replicas)
        made: list[models.Queue] = []
        members: list[models.Replica] = []
        try:
            for member, node_id in enumerate(node_ids, start=1):
                queue = await self.create_queue_on(node_id, f"{name}#{member}", creator, max_queues)
                made.append(queue)
                members.append(models.Replica(member, queue.id, queue.name, node_id))
                await self.control.add_replica(replicated_id, members[-1])
        except BaseException:
            await self._undo_replicated(replicated_id, made)
            raise
        return models.ReplicatedQueue(replicated_id, name, policy, tuple(members))

    async def _undo_replicated(self, replicated_id: int, made: list[models.Queue]) -> None:
        try:
            await self.control.drop_replicated(replicated_id)
            for queue in made:
                await self.delete_queue(queue.id)
        except errors.CourierError as exc:
            log.warning("could not undo the half-made replicated queue %d: %s", replicated_id, exc)

    async def delete_replicated_queue(
        self, name: str, *, actor: int | None = None, timing: Timing | None = None
    ) -> None:
        """Its members (draining ones too) and their messages go. NotAuthorised unless
        ``actor`` created it or is an admin; QueueNotFound. The replicated queue goes
        first, so no client joins a member about to be deleted."""
        replicated_id, queues = await self.control.replicated_to_delete(name, actor)
        await self.control.drop_replicated(replicated_id)
        for queue_id in queues:
            with contextlib.suppress(errors.QueueNotFound):
                await self.delete_queue(queue_id)

    async def get_replicated_queue(
        self, name: str, *, timing: Timing | None = None
    ) -> models.ReplicatedQueue:
        """With each member's producers, consumers and length. QueueNotFound."""
        found: models.ReplicatedQueue = await self.control.replicated(name, timing=timing)
        queues = await asyncio.gather(
            *(self._for(member.queue).get_queue(member.queue) for member in found.members)
        )
        members = tuple(
            dataclasses.replace(member, length=queue.message_count)
            for member, queue in zip(found.members, queues, strict=True)
        )
        return dataclasses.replace(found, members=members)

    async def join_replicated(
        self,
        name: str,
        client_id: int,
        instance_id: int,
        role: models.Role,
        *,
        timing: Timing | None = None,
    ) -> models.Place:
        return await self.control.join_replicated(  # type: ignore[no-any-return]
            name, client_id, instance_id, role, timing=timing
        )

    async def leave_replicated(
        self, place_id: int, client_id: int, *, timing: Timing | None = None
    ) -> bool:
        return await self.control.leave_replicated(place_id, client_id, timing=timing)  # type: ignore[no-any-return]

    # -- messages --------------------------------------------------------------
    async def send(
        self,
        sender_id: int,
        queue_ids: Sequence[int],
        body: bytes,
        *,
        receiver: int | None = None,
        priority: int = models.DEFAULT_PRIORITY,
        context: int | None = None,
        options: SendOptions = repository.PLAIN_SEND,
        timing: Timing | None = None,
    ) -> list[int]:
        target = self.node(self._one_node(queue_ids, "a send"))
        stored: list[int] = await target.send(
            sender_id, queue_ids, body, receiver=receiver, priority=priority,
            context=context, options=options, timing=timing,
        )  # fmt: skip
        for queue_id in queue_ids:
            self._count(queue_id, sent=1)
        return stored

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
    ) -> models.Message:
        def read_from(target: Any) -> Awaitable[models.Message]:
            return target.read(  # type: ignore[no-any-return]
                reader_id, queue_id=queue_id, sender_id=sender_id, order=order, pop=pop,
                lease=lease, selector=selector, timing=timing,
            )  # fmt: skip

        if queue_id is not None:
            message = await read_from(self._for(queue_id))
            self._count(queue_id, taken=int(pop))
            return message
        # A read by sender alone: each node in turn, the first message found.
        *first, last = [backend for _, backend in sorted(self._nodes.items())]
        for target in first:
            try:
                return await read_from(target)
            except (errors.NoMessage, errors.QueueEmpty):
                continue
        return await read_from(last)

    async def pop_response(
        self, reader_id: int, queue_id: int, context: int, *, timing: Timing | None = None
    ) -> models.Message:
        return await self._for(queue_id).pop_response(  # type: ignore[no-any-return]
            reader_id, queue_id, context, timing=timing
        )

    async def watch_queue(
        self,
        queue_id: int,
        seconds: float,
        *,
        wait_ms: int = repository.WATCH_WAIT_MS,
        timing: Timing | None = None,
    ) -> bool:
        return await self._for(queue_id).watch_queue(  # type: ignore[no-any-return]
            queue_id, seconds, wait_ms=wait_ms, timing=timing
        )

    async def send_many(
        self,
        sender_id: int,
        queue_ids: Sequence[int],
        drafts: Sequence[models.Draft],
        *,
        timing: Timing | None = None,
    ) -> list[list[int]]:
        target = self.node(self._one_node(queue_ids, "a batch of sends"))
        stored: list[list[int]] = await target.send_many(
            sender_id, queue_ids, drafts, timing=timing
        )
        for queue_id in queue_ids:
            self._count(queue_id, sent=len(drafts))
        return stored

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
    ) -> list[models.Message]:
        taken: list[models.Message] = await self._for(queue_id).pop_many(
            reader_id, queue_id, count, sender_id=sender_id, order=order, lease=lease,
            selector=selector, timing=timing,
        )  # fmt: skip
        self._count(queue_id, taken=len(taken))
        return taken

    # -- leases ----------------------------------------------------------------
    async def ack(self, holder_id: int, delivery_id: int, *, timing: Timing | None = None) -> None:
        await self._for(delivery_id).ack(holder_id, delivery_id, timing=timing)

    async def nack(
        self,
        holder_id: int,
        delivery_id: int,
        *,
        delay_ms: int = 0,
        reason: str | None = None,
        timing: Timing | None = None,
    ) -> str:
        return await self._for(delivery_id).nack(  # type: ignore[no-any-return]
            holder_id, delivery_id, delay_ms=delay_ms, reason=reason, timing=timing
        )

    async def extend(
        self, holder_id: int, delivery_id: int, lease_ms: int, *, timing: Timing | None = None
    ) -> None:
        await self._for(delivery_id).extend(holder_id, delivery_id, lease_ms, timing=timing)

    async def ack_many(
        self, holder_id: int, delivery_ids: Sequence[int], *, timing: Timing | None = None
    ) -> list[models.Settled]:
        return await self._settle_by_node(
            delivery_ids, lambda target, ids: target.ack_many(holder_id, ids, timing=timing)
        )

    async def nack_many(
        self,
        holder_id: int,
        delivery_ids: Sequence[int],
        *,
        delay_ms: int = 0,
        reason: str | None = None,
        timing: Timing | None = None,
    ) -> list[models.Settled]:
        return await self._settle_by_node(
            delivery_ids,
            lambda target, ids: target.nack_many(
                holder_id, ids, delay_ms=delay_ms, reason=reason, timing=timing
            ),
        )

    async def _settle_by_node(
        self,
        delivery_ids: Sequence[int],
        settle: Callable[[Any, list[int]], Awaitable[list[models.Settled]]],
    ) -> list[models.Settled]:
        """Each node settles its own deliveries; the answers keep the request's order."""
        by_node: dict[int, list[int]] = {}
        for delivery_id in delivery_ids:
            by_node.setdefault(nodes.node_of(delivery_id), []).append(delivery_id)
        if len(by_node) <= 1:
            return (
                await settle(self._for(delivery_ids[0]), list(delivery_ids)) if delivery_ids else []
            )
        answers = await asyncio.gather(
            *(settle(self.node(node_id), ids) for node_id, ids in by_node.items())
        )
        positions = [
            position for ids in by_node.values() for position in ids
        ]  # the order the answers come in
        settled_by_id = dict(zip(positions, (s for answer in answers for s in answer), strict=True))
        return [settled_by_id[delivery_id] for delivery_id in delivery_ids]

    async def give_back(
        self, reader_id: int, message: models.Message, *, timing: Timing | None = None
    ) -> None:
        await self._for(message.queue).give_back(reader_id, message, timing=timing)

    async def release_leases(
        self, holder_id: int, instance_id: int, *, timing: Timing | None = None
    ) -> int:
        released = await self._everywhere(
            lambda backend: backend.release_leases(holder_id, instance_id, timing=timing)
        )
        return sum(released)

    async def sweep(self, limit: int, *, timing: Timing | None = None) -> Sweep:
        swept = await self._everywhere(lambda backend: backend.sweep(limit, timing=timing))
        if len(swept) == 1:
            return swept[0]  # type: ignore[no-any-return]
        due = [each.next_due for each in swept if each.next_due is not None]
        return repository.Sweep(
            sum(each.returned for each in swept),
            sum(each.expired for each in swept),
            min(due) if due else None,
        )

    async def commit(
        self,
        client_id: int,
        operations: Sequence[transactions.Operation],
        *,
        timing: Timing | None = None,
    ) -> list[list[int]]:
        node_id = self._one_node(_transaction_ids(operations), "a transaction")
        return await self.node(node_id).commit(client_id, operations, timing=timing)  # type: ignore[no-any-return]

    # -- topics: the control node ----------------------------------------------
    async def create_topic(
        self, name: str, *, creator: int | None = None, timing: Timing | None = None
    ) -> models.Topic:
        return await self.control.create_topic(name, creator=creator, timing=timing)  # type: ignore[no-any-return]

    async def delete_topic(
        self, topic: int | str, *, actor: int | None = None, timing: Timing | None = None
    ) -> None:
        await self.control.delete_topic(topic, actor=actor, timing=timing)

    async def get_topic(self, topic: int | str, *, timing: Timing | None = None) -> models.Topic:
        return await self.control.get_topic(topic, timing=timing)  # type: ignore[no-any-return]

    async def list_topics(self, *, timing: Timing | None = None) -> list[models.Topic]:
        return await self.control.list_topics(timing=timing)  # type: ignore[no-any-return]

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
    ) -> models.Subscription:
        return await self.control.subscribe(  # type: ignore[no-any-return]
            subscriber_id, topic, instance_id=instance_id, name=name, durable=durable,
            max_queues=max_queues, timing=timing,
        )  # fmt: skip

    async def unsubscribe(
        self, queue_id: int, *, actor: int | None = None, timing: Timing | None = None
    ) -> None:
        await self.control.unsubscribe(queue_id, actor=actor, timing=timing)

    async def publish(
        self,
        sender_id: int,
        topic: int | str,
        body: bytes,
        *,
        receiver: int | None = None,
        priority: int = models.DEFAULT_PRIORITY,
        context: int | None = None,
        options: SendOptions = repository.PLAIN_SEND,
        timing: Timing | None = None,
    ) -> list[tuple[int, int]]:
        return await self.control.publish(  # type: ignore[no-any-return]
            sender_id, topic, body, receiver=receiver, priority=priority, context=context,
            options=options, timing=timing,
        )  # fmt: skip


class Paced:
    """A node as slow as a server with a fixed service time: its requests pass one at
    a time, each holding the node for ``service_s`` before it runs. The lab's stand-in
    for a node's capacity on a machine whose nodes all share the same cores
    (`courier serve --node-service-ms`); the control calls on node 1 are not paced."""

    def __init__(self, backend: Any, service_s: float) -> None:
        self.backend = backend
        self._service_s = service_s
        self._turn = asyncio.Lock()

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.backend, name)
        if not asyncio.iscoroutinefunction(found):
            return found

        async def paced(*args: Any, **kwargs: Any) -> Any:
            async with self._turn:
                await asyncio.sleep(self._service_s)
            return await found(*args, **kwargs)

        return paced


def _transaction_ids(operations: Sequence[transactions.Operation]) -> list[int]:
    """Ids that name the nodes a transaction touches (a publish: the control node's
    topics, so a queue id of node 1 stands for it)."""
    found: list[int] = []
    for operation in operations:
        if isinstance(operation, transactions.SendOperation):
            found.extend(operation.queue_ids)
        elif isinstance(operation, transactions.AckOperation):
            found.append(operation.delivery_id)
        else:
            found.append(1)
    return found


class RoutedInstances:
    """The instance registry's store for a cluster: the registry lives on the control
    node, and the leases taken through an instance that is gone are given back on
    every other node too."""

    def __init__(self, control: Any, routed: RoutedBackend) -> None:
        self._control = control
        self._routed = routed

    async def register_instance(
        self,
        address: str,
        *,
        timing: Timing | None = None,
        ttl_seconds: float = repository.DEFAULT_INSTANCE_TTL,
    ) -> models.Instance:
        return await self._control.register_instance(  # type: ignore[no-any-return]
            address, timing=timing, ttl_seconds=ttl_seconds
        )

    async def heartbeat(self, instance_id: int, *, timing: Timing | None = None) -> None:
        await self._control.heartbeat(instance_id, timing=timing)

    async def expire_instances(self, *, timing: Timing | None = None) -> list[int]:
        return await self._released(await self._control.expire_instances(timing=timing))

    async def reap_instances(self, instance_id: int, *, timing: Timing | None = None) -> list[int]:
        return await self._released(await self._control.reap_instances(instance_id, timing=timing))

    async def unregister_instance(self, instance_id: int, *, timing: Timing | None = None) -> None:
        await self._control.unregister_instance(instance_id, timing=timing)
        await self._released([instance_id])

    async def _released(self, instance_ids: list[int]) -> list[int]:
        if not instance_ids:
            return instance_ids
        for backend in self._routed._others():
            try:
                await backend.release_instances(instance_ids)
            except errors.CourierError as exc:  # the node's sweeper returns them at lease end
                log.warning("cannot release the leases of instances %s: %s", instance_ids, exc)
        return instance_ids
