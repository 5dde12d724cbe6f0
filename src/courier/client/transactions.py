"""Transactions in the client: buffered sends, publishes and acks, committed at once.

    async with client.transaction() as tx:
        job = await client.receive("jobs", timeout=5, lease=30)
        tx.send("results", "done")
        tx.publish("news", "job done")
        tx.ack(job)
    # committed here: all of it, or (on an exception) none of it

Nothing is sent before the commit, so nothing is visible before it. The commit is
one COMMIT frame, applied by the server all or none: the first operation that fails
(a queue that does not exist, a lease that ran out) undoes everything and is raised
with its own error class, naming the operation. An exception inside the block, or
the connection lost before the commit, applies nothing; the acks of a transaction
rolled back are released at once (NACK without delay), so those messages are
delivered again now instead of when their leases run out.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from datetime import datetime
from types import TracebackType

from courier import errors, models, protocol
from courier.client import arguments, client_refs, queue_refs, session, topics

MAX_AGE_MS = 0xFFFF_FFFF

Operation = protocol.Send | protocol.Publish | protocol.Ack


class Transaction:
    """Operations buffered until ``commit``; use it as ``async with``."""

    def __init__(
        self, link: session.Session, queues: queue_refs.QueueNames, clients: client_refs.ClientNames
    ) -> None:
        self._session = link
        self._queues = queues
        self._clients = clients
        self._link = link.connection_now()
        self._started = time.monotonic()
        self._sends: list[tuple[list[queue_refs.QueueRef], protocol.Send]] = []
        self._operations: list[Operation | int] = []  # an int: the index of a send
        self._receivers: dict[int, str] = {}  # operation index -> receiver named by name
        self._open = True
        self.results: list[list[int]] | None = None
        """After the commit: per operation, in order, the ids it stored."""

    def __len__(self) -> int:
        return len(self._operations)

    def send(
        self,
        queues: queue_refs.QueueRef | list[queue_refs.QueueRef],
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
    ) -> None:
        """Send at the commit (as ``AsyncClient.send``; a receiver's name is looked up
        then)."""
        self._check_open()
        fields = arguments.message_fields(
            body, receiver=client_refs.given_id(receiver), priority=priority, context=context,
            delay=delay, not_before=not_before, ttl=ttl, dedup_id=dedup_id,
            properties=properties, persistent=persistent,
        )  # fmt: skip
        send = protocol.Send(queue_ids=(), **fields)
        self._add(len(self._sends), receiver)
        self._sends.append((queue_refs.as_list(queues), send))

    def publish(
        self,
        topic: topics.TopicRef,
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
    ) -> None:
        """Publish at the commit (as ``AsyncClient.publish``; a receiver's name is looked
        up then)."""
        self._check_open()
        fields = arguments.message_fields(
            body, receiver=client_refs.given_id(receiver), priority=priority, context=context,
            delay=delay, not_before=not_before, ttl=ttl, dedup_id=dedup_id,
            properties=properties, persistent=persistent,
        )  # fmt: skip
        self._add(protocol.Publish(*topics.lookup(topic), **fields), receiver)

    def ack(self, delivery: models.Message | int) -> None:
        """Acknowledge a leased message at the commit."""
        self._check_open()
        self._operations.append(protocol.Ack(arguments.delivery(delivery)))

    async def commit(self) -> list[list[int]]:
        """Apply everything, all or none; per operation the ids it stored (none for
        an ack). TransactionExpired when it was open too long; ConnectionLost, with
        nothing sent, when the connection it began on is gone."""
        self._check_open()
        try:
            self._session.check_pinned(self._link)  # before looking names up elsewhere
            operations = tuple(await self._resolved())
        except Exception:
            await self.rollback()  # nothing was sent: give back the leases it would ack
            raise
        self._open = False
        age_ms = min(round((time.monotonic() - self._started) * 1000), MAX_AGE_MS)
        request = protocol.Commit(age_ms, operations)
        reply = await self._session.call_pinned(self._link, request, protocol.CommitReply)
        self.results = [list(ids) for ids in reply.results]
        return self.results

    async def rollback(self) -> None:
        """Apply nothing, and release the leases it would have acknowledged."""
        if not self._open:
            return
        self._open = False
        acked = [op.delivery_id for op in self._operations if isinstance(op, protocol.Ack)]
        if acked and self._session.connection_now() is self._link:
            with contextlib.suppress(errors.CourierError):
                request = protocol.NackMany(delivery_ids=tuple(acked))
                await self._session.call_pinned(self._link, request, protocol.SettledReply)

    async def __aenter__(self) -> Transaction:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is None:
            await self.commit()
        else:
            await self.rollback()

    def _add(self, operation: Operation | int, receiver: client_refs.ClientRef | None) -> None:
        """Buffer a checked operation; a receiver named by name is kept aside, to be
        looked up at the commit (the operation holds None until then)."""
        if isinstance(receiver, str):
            self._receivers[len(self._operations)] = receiver
        self._operations.append(operation)

    async def _resolved(self) -> list[Operation]:
        """The operations with each send's queues and each receiver as ids (names are
        looked up now)."""
        resolved: list[Operation] = []
        for index, operation in enumerate(self._operations):
            if isinstance(operation, int):
                refs, send = self._sends[operation]
                ids = await self._queues.ids(refs)
                operation = dataclasses.replace(send, queue_ids=ids)
            name = self._receivers.get(index)
            if name is not None and not isinstance(operation, protocol.Ack):
                operation = dataclasses.replace(operation, receiver=await self._clients.id(name))
            resolved.append(operation)
        return resolved

    def _check_open(self) -> None:
        if not self._open:
            raise errors.BadRequest("this transaction is over: begin a new one")
