"""``AsyncClient``: the Courier client library (the sync ``Client`` wraps this one).

    async with AsyncClient.connect("127.0.0.1:7400", name="alice", secret=secret) as client:
        await client.send("jobs", "resize photo 17")
        message = await client.pop("jobs")

Request/reply: ``request`` sends with a fresh *context* and waits for the message in
the same queue that is addressed to this client and carries that context; the other
side answers with ``reply(message, body)``. Contexts are random 63-bit integers
(``arguments.new_context``): unlike a per-client counter they cannot repeat after a
client restarts, so a late reply to an earlier run is never taken for a new one.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Iterable, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, TypedDict, Unpack

from courier import config, errors, models, protocol, scram
from courier.client import (
    arguments,
    batches,
    client_refs,
    clock,
    measurement_hook,
    queue_refs,
    replicated,
    session,
    topics,
    transactions,
)

Servers = arguments.Servers

DEFAULT_CONNECT_TIMEOUT = config.ClientSettings().connect_timeout


class ClientOptions(TypedDict, total=False):
    """Keyword options of ``AsyncClient`` and ``Client`` (see ``AsyncClient.__init__``)."""

    connect_timeout: float
    request_timeout: float | None
    failover_timeout: float
    recorder: measurement_hook.Recorder | None
    heartbeat_interval: float | None
    tls: bool
    ca: str | Path | None


class AsyncClient(topics.TopicMethods, replicated.ReplicatedMethods):
    """A Courier client: one connection at a time, failing over across ``servers``."""

    def __init__(
        self,
        servers: Servers,
        *,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        request_timeout: float | None = 30.0,
        failover_timeout: float = 20.0,
        recorder: measurement_hook.Recorder | None = None,
        heartbeat_interval: float | None = session.HEARTBEAT_INTERVAL,
        tls: bool = False,
        ca: str | Path | None = None,
    ) -> None:
        """
        connect_timeout: seconds to open one TCP connection.
        request_timeout: seconds to wait for a reply (on top of a call's own timeout);
            None waits for ever. Past it a call raises RequestTimeout.
        failover_timeout: how long to keep trying the servers after losing one.
        recorder: called with a ``CallRow`` after every call (the lab's hook): a plain
            tuple, whose values ``CallRecord._make(row)`` names.
        heartbeat_interval: seconds of sending nothing after which the client sends a
            PING, so the server does not take it for dead; None sends none.
        tls: speak TLS (1.2 or later), checking the server's certificate and host name
            against the system's trust store, or against ``ca``.
        ca: a PEM bundle of the CAs to trust (implies ``tls``); TlsError if unusable.
        """
        self._session = session.Session(
            arguments.addresses(servers),
            connect_timeout=connect_timeout,
            request_timeout=request_timeout,
            failover_timeout=failover_timeout,
            recorder=recorder,
            heartbeat_interval=heartbeat_interval,
            tls=arguments.tls_context(tls, ca),
        )
        self._queues = queue_refs.QueueNames(self.get_queue)
        self._clients = client_refs.ClientNames(self.get_client)

    # -- connecting ------------------------------------------------------------------

    @classmethod
    def connect(
        cls,
        servers: Servers,
        *,
        name: str | None = None,
        client_id: int | None = None,
        secret: str | None = None,
        **options: Unpack[ClientOptions],
    ) -> Opening:
        """Connect (and log in when ``name`` or ``client_id`` is given, proving
        ``secret``; without one, only a server with open login lets the client in).

        Await it for a client (``client = await AsyncClient.connect(...)``) or use it
        as ``async with AsyncClient.connect(...) as client:``, which closes at the end.
        """
        return Opening(cls(servers, **options), name=name, client_id=client_id, secret=secret)

    async def open(
        self, *, name: str | None = None, client_id: int | None = None, secret: str | None = None
    ) -> None:
        """Connect to the first server that accepts, logging in if a client is named."""
        if name is not None and client_id is not None:
            raise errors.BadRequest("log in with a name or a client id, not both")
        credentials = None
        if name is not None or client_id is not None:
            credentials = session.Credentials(client_id, name, secret)
        try:
            await self._session.start(credentials)
        except (errors.ClientNotFound, errors.ClientOnline) as exc:
            raise _login_failure(exc, name or client_id) from None

    async def register(
        self,
        name: str,
        mode: models.ClientMode | str = models.ClientMode.READ_WRITE,
        *,
        secret: str | None = None,
    ) -> models.ClientInfo:
        """Create a client identity (no login needed) that logs in with ``secret``
        (``courier.scram.new_secret()`` makes a good one); only the secret's SCRAM
        verifier is sent. ClientExists if the name is taken; an admin client can be
        created only by an admin."""
        verifier = None if secret is None else scram.verifier(secret)
        request = protocol.Register(name=name, mode=arguments.mode(mode), verifier=verifier)
        try:
            return (await self._session.call(request, protocol.ClientReply)).client
        except errors.ClientExists as exc:
            raise _reworded(exc, f"a client named {name!r} already exists") from None

    async def login(
        self, *, name: str | None = None, client_id: int | None = None, secret: str | None = None
    ) -> models.ClientInfo:
        """Log in by name or by id (exactly one), proving ``secret``. A wrong name or
        secret is NotAuthorised ("login failed"), either way; ClientOnline."""
        if (name is None) == (client_id is None):
            raise errors.BadRequest("log in with a name or a client id (exactly one)")
        try:
            return await self._session.login(session.Credentials(client_id, name, secret))
        except (errors.ClientNotFound, errors.ClientOnline) as exc:
            raise _login_failure(exc, name or client_id) from None

    async def set_secret(self, secret: str, client: int | str | None = None) -> None:
        """Replace a secret: this client's own (``client`` None), or, for an admin,
        any client's (by id or name). Sessions already open stay open."""
        target = client
        if target is None:
            if self._session.client is None:
                raise errors.NotLoggedIn("log in first: a client sets its own secret")
            target = self._session.client.id
        client_id, name = (None, target) if isinstance(target, str) else (target, None)
        request = protocol.SetSecret(client_id, name, scram.verifier(secret))
        await self._session.call(request, protocol.Done)

    async def disable_client(self, client: int | str) -> None:
        """(Admin) The client can no longer log in; its open session ends at once."""
        await self._set_enabled(client, enabled=False)

    async def enable_client(self, client: int | str) -> None:
        """(Admin) A disabled client may log in again."""
        await self._set_enabled(client, enabled=True)

    async def _set_enabled(self, client: int | str, *, enabled: bool) -> None:
        client_id, name = (None, client) if isinstance(client, str) else (client, None)
        request = protocol.SetClientEnabled(client_id, name, enabled)
        await self._session.call(request, protocol.Done)

    async def get_client(self, client: client_refs.ClientRef) -> models.ClientIdentity:
        """Look a client up by id (int) or by name (str): its id and name, which is all
        one client may learn of another. ClientNotFound ("no client named 'carol'").

        ``send``, ``request``, ``publish`` and the like take a receiver's name too and
        look it up here, once per name for the client's life."""
        client_id, name = (None, client) if isinstance(client, str) else (client, None)
        try:
            reply = await self._session.call(
                protocol.GetClient(client_id, name), protocol.ClientIdentityReply
            )
        except errors.ClientNotFound as exc:
            raise _reworded(exc, client_refs.describe_missing(client)) from None
        self._clients.remember(reply.client)
        return reply.client

    @property
    def client_id(self) -> int | None:
        """The logged-in client's id (None before login)."""
        return self._session.client.id if self._session.client else None

    @property
    def name(self) -> str | None:
        """The logged-in client's name (None before login)."""
        return self._session.client.name if self._session.client else None

    @property
    def server(self) -> str | None:
        """host:port of the middleware in use right now."""
        return self._session.server

    async def ping(self) -> float:
        """Round trip to the server, in seconds."""
        started = time.perf_counter()
        await self._session.call(protocol.Ping(), protocol.Pong)
        return time.perf_counter() - started

    async def clock_offset(self, samples: int = 5) -> tuple[int, int]:
        """(server clock - client clock, uncertainty), in ns; see ``clock.estimate``."""
        taken = []
        for _ in range(samples):
            sent_ns = time.time_ns()
            pong = await self._session.call(protocol.Ping(), protocol.Pong)
            taken.append(clock.Sample(sent_ns, pong.server_time_ns, time.time_ns()))
        return clock.estimate(taken)

    async def close(self) -> None:
        """Log out and disconnect; the client cannot be used afterwards."""
        await self._session.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def transaction(self) -> transactions.Transaction:
        """A transaction: sends, publishes and acks buffered, then committed all or
        none (``async with client.transaction() as tx: tx.send(...)``; see
        ``courier.client.transactions``)."""
        return transactions.Transaction(self._session, self._queues, self._clients)

    # -- queues ----------------------------------------------------------------------

    async def create_queue(self, name: str) -> models.Queue:
        """QueueExists if the name is taken."""
        try:
            reply = await self._session.call(protocol.CreateQueue(name=name), protocol.QueueReply)
        except errors.QueueExists as exc:
            raise _reworded(exc, f"queue {name!r} already exists") from None
        self._queues.remember(reply.queue)
        return reply.queue

    async def delete_queue(self, queue: queue_refs.QueueRef, *, if_empty: bool = False) -> None:
        """Delete a queue and its messages; with ``if_empty``, QueueNotEmpty if any remain."""

        async def delete(ids: tuple[int, ...]) -> None:
            request = protocol.DeleteQueue(queue_id=ids[0], if_empty=if_empty)
            try:
                await self._session.call(request, protocol.Done)
            except errors.QueueNotEmpty as exc:
                raise _reworded(exc, f"{queue_refs.describe(queue)} is not empty") from None

        await self._queues.apply([queue], delete)
        if isinstance(queue, str):
            self._queues.forget(queue)

    async def get_queue(self, name_or_id: queue_refs.QueueRef) -> models.Queue:
        """The queue with its current message count. QueueNotFound."""
        if isinstance(name_or_id, models.Queue):
            name_or_id = name_or_id.id
        elif isinstance(name_or_id, models.Subscription):
            name_or_id = name_or_id.queue
        if isinstance(name_or_id, str):
            request = protocol.GetQueue(queue_id=None, name=name_or_id)
        else:
            request = protocol.GetQueue(queue_id=name_or_id, name=None)
        try:
            queue = (await self._session.call(request, protocol.QueueReply)).queue
        except errors.QueueNotFound as exc:
            raise queue_refs.missing([name_or_id], exc) from None
        self._queues.remember(queue)
        return queue

    async def list_queues(self) -> list[models.Queue]:
        """Every queue, ordered by id, with its message count."""
        reply = await self._session.call(protocol.ListQueues(), protocol.QueueListReply)
        for queue in reply.queues:
            self._queues.remember(queue)
        return list(reply.queues)

    async def queues_for_me(self) -> list[models.Queue]:
        """Queues holding a message I could read; counts are of those messages."""
        reply = await self._session.call(protocol.QueuesForMe(), protocol.QueueListReply)
        return list(reply.queues)

    # -- messages --------------------------------------------------------------------

    async def send(
        self,
        queues: queue_refs.QueueRef | Sequence[queue_refs.QueueRef],
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
    ) -> list[int]:
        """Put a copy of the message in each queue, all or none; the new message ids.

        ``body`` is bytes, or text sent as UTF-8. With a ``receiver`` (a client id, or a
        name, looked up once: ClientNotFound), only that client may read the copies.
        ``delay`` (seconds) or ``not_before`` keeps the copies invisible until then;
        after ``ttl`` seconds a copy nobody took is dropped (or dead-lettered, if its
        queue says so). A retry with the same ``dedup_id`` within the server's dedup
        window stores nothing and returns the first send's ids, so a send retried after
        a lost reply is stored once.
        ``properties`` (text keys to text values) travel with the message to its
        reader; BadRequest beyond the limits (64 of them, keys 1 to 255 bytes, values
        up to 4096 bytes of UTF-8). ``persistent=False`` stores the copies without the
        database's write-ahead log: faster, but lost if the database crashes (every
        other guarantee holds while it runs; see docs/architecture.md, "Delivery
        modes").
        """
        refs = queue_refs.as_list(queues)
        if isinstance(receiver, str):  # an id (the common case) costs no await
            receiver = await self._clients.id(receiver)
        fields = arguments.message_fields(
            body, receiver=receiver, priority=priority, context=context, delay=delay,
            not_before=not_before, ttl=ttl, dedup_id=dedup_id, properties=properties,
            persistent=persistent,
        )  # fmt: skip

        async def send(ids: tuple[int, ...]) -> list[int]:
            request = protocol.Send(queue_ids=ids, **fields)
            return list((await self._session.call(request, protocol.MessageIdsReply)).ids)

        return await self._queues.apply(refs, send)

    async def peek(
        self,
        queue: queue_refs.QueueRef | None = None,
        *,
        sender: client_refs.ClientRef | None = None,
        order: models.Order | str = models.Order.TIME,
        selector: str | None = None,
    ) -> models.Message | None:
        """The first message visible to me (left in place), or None. QueueNotFound.
        With a ``sender`` (a client id, or a name looked up once: ClientNotFound), only
        that client's messages; with no queue, from every queue I may read. With a
        ``selector``, the first one it matches (BadSelector if it does not parse; see
        docs/selectors.md)."""
        return await self._read(queue, sender, order, pop=False, selector=selector)

    async def pop(
        self,
        queue: queue_refs.QueueRef | None = None,
        *,
        sender: client_refs.ClientRef | None = None,
        order: models.Order | str = models.Order.TIME,
        lease: float | None = None,
        selector: str | None = None,
    ) -> models.Message | None:
        """Take the first message visible to me, or None (``sender`` as for ``peek``).
        QueueNotFound.

        Without a lease the message is deleted as it is read (at most once: lost if
        the reply is). With ``lease`` seconds it stays stored but invisible until you
        ``ack`` it; unacknowledged, it is delivered again when the lease runs out or
        this connection closes (at least once). With a ``selector`` (for example
        ``"kind = 'order' AND amount > 100"``), only a message it matches is taken;
        BadSelector if it does not parse (docs/selectors.md).
        """
        return await self._read(queue, sender, order, pop=True, lease=lease, selector=selector)

    async def receive(
        self,
        queue: queue_refs.QueueRef,
        *,
        timeout: float,
        sender: client_refs.ClientRef | None = None,
        order: models.Order | str = models.Order.TIME,
        lease: float | None = None,
        selector: str | None = None,
    ) -> models.Message | None:
        """Pop, waiting up to ``timeout`` seconds for a message to arrive; else None.
        ``lease`` and ``selector`` as for ``pop``: with a selector it waits for a
        message the selector matches.

        A call cancelled on the client side (``asyncio.wait_for``, Ctrl-C) tells the
        server, which then takes nothing for it; a leased message already on its way
        back is released at once.
        """
        request_order, timeout_ms = arguments.order(order), arguments.milliseconds(timeout)
        lease_ms = arguments.positive_ms(lease, "lease") or 0
        wanted = arguments.selector(selector)
        sender_id = await self._clients.id(sender) if isinstance(sender, str) else sender

        async def receive(ids: tuple[int, ...]) -> models.Message | None:
            request = protocol.Receive(
                queue_id=ids[0], sender_id=sender_id, order=request_order, timeout_ms=timeout_ms,
                lease_ms=lease_ms, selector=wanted,
            )  # fmt: skip
            try:
                reply = await self._session.call(request, protocol.MessageReply, wait=timeout)
            except errors.NoMessage:
                return None
            return reply.message

        return await self._queues.apply([queue], receive)

    async def ack(self, delivery: models.Message | int) -> None:
        """A leased message is done: it is deleted. LeaseExpired if the lease ran out
        (the message may be with another reader now) or it was settled already."""
        request = protocol.Ack(arguments.delivery(delivery))
        await self._session.call(request, protocol.Done)

    async def nack(
        self, delivery: models.Message | int, *, delay: float = 0.0, reason: str | None = None
    ) -> None:
        """Give a leased message back: visible again after ``delay`` seconds, or moved to
        the dead-letter queue once it has had its queue's max_deliveries; ``reason`` is
        kept with it. LeaseExpired as for ``ack``."""
        request = protocol.Nack(
            arguments.delivery(delivery), arguments.delay_ms(delay, None), reason or None
        )
        await self._session.call(request, protocol.Done)

    async def extend(self, delivery: models.Message | int, seconds: float) -> None:
        """Hold a leased message longer: its lease now ends ``seconds`` from now."""
        lease_ms = arguments.positive_ms(seconds, "lease")
        assert lease_ms is not None
        await self._session.call(
            protocol.Extend(arguments.delivery(delivery), lease_ms), protocol.Done
        )

    # -- batches ---------------------------------------------------------------------

    async def send_many(
        self,
        queues: queue_refs.QueueRef | Sequence[queue_refs.QueueRef],
        messages: Iterable[bytes | str | batches.Outgoing],
        *,
        receiver: client_refs.ClientRef | None = None,
        priority: int = models.DEFAULT_PRIORITY,
        context: int | None = None,
        delay: float | None = None,
        not_before: datetime | None = None,
        ttl: float | None = None,
        properties: models.Properties | None = None,
        persistent: bool = True,
    ) -> list[list[int]]:
        """Store many messages in each queue in one request, all or none, in order;
        per message its ids (one per queue, in the order the queues are given).

        A message is a body (bytes, or text sent as UTF-8), which takes this call's
        receiver, priority, context, delay, ttl, properties and persistence, or an ``Outgoing``
        with fields of its own (and a dedup id). A receiver, the call's or an
        ``Outgoing``'s, is a client id or name (each name looked up once: ClientNotFound,
        and nothing is sent). One bad message fails the whole batch, naming its number,
        and nothing is stored. At most 1000 messages, and the server's batch byte limit
        (1 MiB of bodies by default), per call.
        """
        refs = queue_refs.as_list(queues)
        arguments.check_priority(priority)
        if isinstance(receiver, str):
            receiver = await self._clients.id(receiver)
        defaults = batches.Defaults(
            receiver,
            priority,
            context,
            delay,
            not_before,
            ttl,
            arguments.message_properties(properties),
            persistent,
        )
        batch = tuple(messages)
        try:
            drafts = batches.drafts(batch, defaults)
        except batches.NamedReceivers as named:
            drafts = batches.drafts(batch, defaults, await self._receiver_ids(named.names))

        async def send_many(ids: tuple[int, ...]) -> list[list[int]]:
            reply = await self._session.call(protocol.SendMany(ids, drafts), protocol.BatchIdsReply)
            return [list(row) for row in reply.ids]

        return await self._queues.apply(refs, send_many)

    async def _receiver_ids(self, names: dict[str, int]) -> dict[str, int]:
        """The ids of a batch's receivers named by name; an unknown one's ClientNotFound
        names the first message that gave it."""
        ids = {}
        for name, number in sorted(names.items(), key=lambda item: item[1]):
            try:
                ids[name] = await self._clients.id(name)
            except errors.ClientNotFound as exc:
                raise errors.in_batch(number, exc) from None
        return ids

    async def receive_many(
        self,
        queue: queue_refs.QueueRef,
        *,
        max_messages: int,
        timeout: float = 0.0,
        sender: client_refs.ClientRef | None = None,
        order: models.Order | str = models.Order.TIME,
        lease: float | None = None,
        min_messages: int = 1,
        max_wait: float = 0.0,
        selector: str | None = None,
    ) -> list[models.Message]:
        """Pop up to ``max_messages`` visible to me, in read order, waiting up to
        ``timeout`` seconds for the first; an empty list if none came.

        It answers as soon as there is one, unless ``min_messages`` asks for more:
        then it goes on taking until it holds that many or ``max_wait`` seconds have
        passed since the first. ``lease`` and ``selector`` as for ``pop``. The answer stops short of
        ``max_messages`` when the bodies would pass the server's batch byte limit;
        the rest stay in the queue.
        """
        count = batches.counted(max_messages, "max_messages")
        least = batches.counted(min_messages, "min_messages")
        if least > count:
            raise errors.BadRequest(f"min_messages {least} is more than max_messages {count}")
        request_order, timeout_ms = arguments.order(order), arguments.milliseconds(timeout)
        window_ms = arguments.milliseconds(max_wait)
        lease_ms = arguments.positive_ms(lease, "lease") or 0
        wanted = arguments.selector(selector)
        sender_id = await self._clients.id(sender) if isinstance(sender, str) else sender

        async def receive_many(ids: tuple[int, ...]) -> list[models.Message]:
            request = protocol.ReceiveMany(
                queue_id=ids[0], sender_id=sender_id, order=request_order, max_messages=count,
                timeout_ms=timeout_ms, lease_ms=lease_ms, min_messages=least,
                max_wait_ms=window_ms, selector=wanted,
            )  # fmt: skip
            try:
                reply = await self._session.call(
                    request, protocol.MessagesReply, wait=timeout + max_wait
                )
            except errors.NoMessage:  # the wait was cancelled
                return []
            return list(reply.messages)

        return await self._queues.apply([queue], receive_many)

    async def pop_many(
        self,
        queue: queue_refs.QueueRef,
        max_messages: int,
        *,
        sender: client_refs.ClientRef | None = None,
        order: models.Order | str = models.Order.TIME,
        lease: float | None = None,
        selector: str | None = None,
    ) -> list[models.Message]:
        """Take up to ``max_messages`` visible to me now, in read order; an empty list
        when there are none. ``lease`` and ``selector`` as for ``pop``."""
        return await self.receive_many(
            queue, max_messages=max_messages, sender=sender, order=order, lease=lease,
            selector=selector,
        )  # fmt: skip

    async def ack_many(self, deliveries: Iterable[models.Message | int]) -> list[models.Settled]:
        """Acknowledge many leased messages in one request; per delivery, in order,
        whether it was settled (``ok``) or why not (LEASE_EXPIRED: its lease ran out,
        or it was settled already). One expired lease fails no other."""
        request = protocol.AckMany(batches.deliveries(deliveries))
        return list((await self._session.call(request, protocol.SettledReply)).settled)

    async def nack_many(
        self,
        deliveries: Iterable[models.Message | int],
        *,
        delay: float = 0.0,
        reason: str | None = None,
    ) -> list[models.Settled]:
        """Give many leased messages back in one request, as ``nack``; per delivery,
        in order, whether it was settled, as for ``ack_many``."""
        request = protocol.NackMany(
            batches.deliveries(deliveries), arguments.delay_ms(delay, None), reason or None
        )
        return list((await self._session.call(request, protocol.SettledReply)).settled)

    async def configure_queue(
        self,
        queue: queue_refs.QueueRef,
        *,
        max_deliveries: int | None = None,
        dead_letter_queue: queue_refs.QueueRef | None = None,
        dead_letter_expired: bool = False,
        max_messages: int | None = None,
        max_bytes: int | None = None,
        overflow: models.Overflow | str = models.Overflow.REFUSE,
    ) -> models.QueueSettings:
        """Set how a queue treats failing messages: after ``max_deliveries`` leases a
        message moves to ``dead_letter_queue`` (dropped without one), and with
        ``dead_letter_expired`` expired messages move there too.

        And its limits: at most ``max_messages`` messages and ``max_bytes`` bytes
        (leased and delayed ones included; None: no limit). One more is refused with
        QuotaExceeded (``overflow="refuse"``), or the oldest visible messages are
        dropped to make room (``"drop_oldest"``). Settings not given are reset."""
        for name, value in (("max_deliveries", max_deliveries), ("max_messages", max_messages),
                            ("max_bytes", max_bytes)):  # fmt: skip
            if value is not None and value <= 0:
                raise errors.BadRequest(f"{name} must be positive, not {value}")
        dead_letters = (
            None if dead_letter_queue is None else await self._queues.id(dead_letter_queue)
        )
        request = protocol.ConfigureQueue(
            await self._queues.id(queue), max_deliveries, dead_letters, dead_letter_expired,
            max_messages, max_bytes, _overflow(overflow),
        )  # fmt: skip
        return (await self._session.call(request, protocol.QueueSettingsReply)).settings

    async def set_queue_acl(
        self,
        queue: queue_refs.QueueRef,
        *,
        senders: Iterable[int | str] | None = None,
        readers: Iterable[int | str] | None = None,
    ) -> models.QueueAcl:
        """Say who may send to a queue and who may read it: clients by id or name;
        None (the default) lets anyone. Both lists are set at once, so leaving one out
        opens it. The queue's owner and admins may always do both, and only they may
        call this (NotAuthorised). A client left out is refused with NotAuthorised."""
        request = protocol.SetQueueAcl(
            await self._queues.id(queue),
            None if senders is None else tuple(senders),
            None if readers is None else tuple(readers),
        )
        return (await self._session.call(request, protocol.QueueAclReply)).acl

    async def queue_acl(self, queue: queue_refs.QueueRef) -> models.QueueAcl:
        """A queue's access lists (None: anyone); only for its owner or an admin."""
        request = protocol.GetQueueAcl(await self._queues.id(queue))
        return (await self._session.call(request, protocol.QueueAclReply)).acl

    async def request(
        self,
        queue: queue_refs.QueueRef,
        body: bytes | str,
        *,
        timeout: float,
        receiver: client_refs.ClientRef | None = None,
        priority: int = models.DEFAULT_PRIORITY,
        properties: models.Properties | None = None,
        persistent: bool = True,
    ) -> models.Message:
        """Send a request and wait up to ``timeout`` seconds for its reply.

        The reply is the message in the same queue addressed to me with the request's
        context. RequestTimeout if none arrives in time. ``receiver`` (an id or a name,
        as for ``send``) lets only that client take the request.
        """
        arguments.milliseconds(timeout)  # refuse a negative timeout before sending anything
        deadline = time.monotonic() + timeout
        context = arguments.new_context()
        sent = await self.send(
            queue, body, receiver=receiver, priority=priority, context=context,
            properties=properties, persistent=persistent,
        )  # fmt: skip
        message = await self._await_response(queue, context, deadline - time.monotonic())
        if message is None:
            raise errors.RequestTimeout(
                f"no reply to request {sent[0]} in {queue_refs.describe(queue)} within {timeout:g}s"
            )
        return message

    async def reply(
        self,
        request: models.Message,
        body: bytes | str,
        *,
        priority: int = models.DEFAULT_PRIORITY,
        properties: models.Properties | None = None,
        persistent: bool = True,
    ) -> int:
        """Answer a request message: to its sender, in its queue, with its context."""
        if request.context is None:
            raise errors.BadRequest(f"message {request.id} is not a request: it has no context")
        ids = await self.send(
            request.queue, body, receiver=request.sender, priority=priority,
            context=request.context, properties=properties, persistent=persistent,
        )  # fmt: skip
        return ids[0]

    async def _await_response(
        self, queue: queue_refs.QueueRef, context: int, timeout: float
    ) -> models.Message | None:
        timeout = max(timeout, 0.0)
        request = protocol.AwaitResponse(
            queue_id=await self._queues.id(queue),
            context=context,
            timeout_ms=arguments.milliseconds(timeout),
        )
        try:
            reply = await self._session.call(request, protocol.MessageReply, wait=timeout)
        except errors.NoMessage:
            return None
        except errors.QueueNotFound as exc:
            raise queue_refs.missing([queue], exc) from None
        return reply.message

    async def _read(
        self,
        queue: queue_refs.QueueRef | None,
        sender: client_refs.ClientRef | None,
        order: models.Order | str,
        *,
        pop: bool,
        lease: float | None = None,
        selector: str | None = None,
    ) -> models.Message | None:
        read_order = arguments.order(order)
        lease_ms = arguments.positive_ms(lease, "lease") or 0
        wanted = arguments.selector(selector)
        sender_id = await self._clients.id(sender) if isinstance(sender, str) else sender

        async def read(ids: tuple[int, ...]) -> models.Message | None:
            request = protocol.Read(
                queue_id=ids[0] if ids else None, sender_id=sender_id, order=read_order, pop=pop,
                lease_ms=lease_ms, selector=wanted,
            )  # fmt: skip
            try:
                return (await self._session.call(request, protocol.MessageReply)).message
            except errors.NoMessage:
                return None

        return await self._queues.apply([] if queue is None else [queue], read)


class Opening:
    """What ``AsyncClient.connect`` returns: awaitable, and an async context manager."""

    def __init__(
        self,
        client: AsyncClient,
        *,
        name: str | None,
        client_id: int | None,
        secret: str | None = None,
    ) -> None:
        self.client = client
        self._name = name
        self._client_id = client_id
        self._secret = secret

    def __await__(self) -> Generator[Any, None, AsyncClient]:
        return self._open().__await__()

    async def __aenter__(self) -> AsyncClient:
        return await self._open()

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.client.close()

    async def _open(self) -> AsyncClient:
        await self.client.open(name=self._name, client_id=self._client_id, secret=self._secret)
        return self.client


def _login_failure(exc: errors.CourierError, who: str | int | None) -> errors.CourierError:
    if isinstance(exc, errors.ClientNotFound):
        return _reworded(exc, f"no client is registered as {who!r}")
    return _reworded(exc, f"client {who!r} is already online")


def _reworded(exc: errors.CourierError, message: str) -> errors.CourierError:
    """The server's error, in the words the caller used (names quoted as given)."""
    return type(exc)(message)


def _overflow(overflow: models.Overflow | str) -> models.Overflow:
    try:
        return models.Overflow(overflow)
    except ValueError:
        raise errors.BadRequest(f"overflow {overflow!r} is not refuse or drop_oldest") from None
