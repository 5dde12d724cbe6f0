"""Typed async access to Courier's stored functions: the only caller of them.

Every method is one stored-function call. Every method takes an optional
``timing`` sink that it fills with pool wait, round trip and the execution time the
function reported, so the lab can split database time from network time.
Errors arrive as courier.errors exceptions, translated in one place (_translate).

    repo = await Repository.connect(dsn)
    queue = await repo.create_queue("jobs")
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeGuard, TypeVar

import asyncpg

from courier import config, errors, models, selectors
from courier.db import _translate, jsonb, nodes, pools, topic_rows, transactions
from courier.protocol import constants as wire_limits

log = logging.getLogger(__name__)

DEFAULT_INSTANCE_TTL = config.ServerSettings().instance_ttl
WATCH_WAIT_MS = 200
"""How long a new watch may wait for the sends in flight to its queue (``watch_queue``);
below PostgreSQL's deadlock_timeout, so a watch gives up before a send is aborted."""
DEFAULT_LIMITS = config.Limits()
DEFAULT_POOL = config.PoolSettings()
MESSAGE_COUNT_CAP = 10_000
"""A queue's message_count counts this many at most: listing a huge queue costs no more."""
TRANSFER_COLUMNS = (
    "id", "sender_id", "receiver_id", "context", "priority", "created_at", "body",
    "deliveries", "expires_at", "dead_from", "failure", "properties", "persistent",
)  # fmt: skip
"""The outbox columns a transfer carries to its target, in courier_transfer_in_v1's order."""

T = TypeVar("T")

CONFLICT_PAUSES_S = (0.005, 0.02, 0.08)
"""Before each new try of a call the database aborted over a conflict with another
(a deadlock it broke): as many tries again as there are pauses, each pause drawn
from half to one and a half times its value, so that two calls that deadlocked do
not meet again in step."""

KEEP_CALLS = 1_000
"""Calls a kept connection serves again before it goes back to the pool once, so
that the pool's own rules (its cap on queries per connection, expired generations)
still apply to it."""


class KeptConnection:
    """The pooled connection one task keeps between its calls (``_keep_connection``):
    empty until the first call, while a call has it out, and after a call fails,
    which hands it back. Once ``closed``, nothing more is kept."""

    __slots__ = ("calls", "closed", "connection")

    def __init__(self) -> None:
        self.connection: asyncpg.Connection | None = None
        self.calls = 0
        self.closed = False


_KEPT: contextvars.ContextVar[KeptConnection | None] = contextvars.ContextVar(
    "courier_kept_connection", default=None
)


@dataclass(slots=True)
class Timing:
    """Filled in by a repository call; all values in nanoseconds."""

    pool_wait_ns: int = 0
    round_trip_ns: int = 0
    exec_ns: int = 0

    def spans(self, started: int, acquired: int, answered: int, exec_ns: int) -> None:
        """One call's times from its perf_counter_ns instants and its reported exec."""
        self.pool_wait_ns = acquired - started
        self.round_trip_ns = answered - acquired
        self.exec_ns = exec_ns


@dataclass(frozen=True, slots=True)
class SendOptions:
    """What a send may ask beyond storing: stay invisible for ``delay_ms``, expire
    after ``ttl_ms`` untaken, store nothing again for a retry with ``dedup_id``,
    carry ``properties`` (text keys to text values), and, with ``persistent`` False,
    skip the write-ahead log (stored unlogged: lost if the database crashes)."""

    delay_ms: int = 0
    ttl_ms: int | None = None
    dedup_id: str | None = None
    properties: models.Properties = field(default_factory=dict, hash=False)
    persistent: bool = True

    @property
    def plain(self) -> bool:
        """Nothing beyond storing: the set-based path of the exchange stores it."""
        return asks_nothing(self.delay_ms, self.ttl_ms, self.dedup_id, self.properties)


def asks_nothing(
    delay_ms: int, ttl_ms: int | None, dedup_id: str | None, properties: models.Properties
) -> bool:
    """Whether a send with these options asks for nothing beyond storing."""
    return not delay_ms and ttl_ms is None and dedup_id is None and not properties


PLAIN_SEND = SendOptions()


@dataclass(frozen=True, slots=True)
class Lease:
    """A pop that leases its message for ``ms`` to the reader, through an instance."""

    ms: int
    instance_id: int


@dataclass(frozen=True, slots=True)
class Sweep:
    """What one sweep did, and when the next thing falls due (None: nothing held)."""

    returned: int
    expired: int
    next_due: datetime | None


class Repository:
    def __init__(
        self,
        pool: asyncpg.Pool,
        limits: config.Limits = DEFAULT_LIMITS,
        timeouts: config.PoolSettings = DEFAULT_POOL,
    ) -> None:
        self.pool = pool
        self.limits = limits
        self._acquire_timeout = timeouts.acquire_timeout
        self._statement_timeout = timeouts.statement_timeout

    @classmethod
    async def connect(
        cls,
        dsn: str,
        pool: config.PoolSettings = DEFAULT_POOL,
        limits: config.Limits = DEFAULT_LIMITS,
    ) -> Repository:
        """Open a pool on dsn whose connections are released as the middleware's are,
        without a reset round trip (``pools.create_pool``); Unavailable when the
        database cannot be reached."""
        try:
            opened = await pools.create_pool(dsn, pool.min_size, pool.max_size)
        except _translate.TRANSLATED as exc:
            raise _translate.translate(exc) from exc
        return cls(opened, limits, pool)

    async def close(self) -> None:
        """Close gracefully, or terminate if connections do not come back in time."""
        await pools.close_pool(self.pool)

    @staticmethod
    def _keep_connection(kept: KeptConnection) -> None:
        """From here on, the calls of the current task keep their connection in
        ``kept`` instead of acquiring and releasing one each: for a client alone that
        was about a tenth of the middleware's CPU per request. Only for a task that
        makes one call at a time, and never one whose tasks run calls at once (they
        would inherit it)."""
        _KEPT.set(kept)

    # -- clients ---------------------------------------------------------------
    async def register_client(
        self,
        name: str,
        mode: models.ClientMode = models.ClientMode.READ_WRITE,
        *,
        verifier: models.Verifier | None = None,
        timing: Timing | None = None,
    ) -> models.ClientInfo:
        """ClientExists on a duplicate name; BadRequest on an empty name or a bad
        verifier. ``verifier`` is what is kept of the client's secret (None: none)."""
        salt, iterations, stored_key, server_key = _verifier_columns(verifier)
        row = await self._call(
            "courier_register_client_v2($1, $2, $3, $4, $5, $6)",
            name, str(mode), salt, iterations, stored_key, server_key,
            timing=timing,
        )  # fmt: skip
        return _client(row)

    async def auth_verifier(
        self, client: int | str, *, timing: Timing | None = None
    ) -> tuple[int, models.Verifier] | None:
        """The client's id and verifier; None when it does not exist, is disabled or
        has no secret (a login fails alike for each)."""
        client_id, name = _id_or_name(client)
        row = await self._call("courier_auth_verifier_v1($1, $2)", client_id, name, timing=timing)
        if row["id"] is None:
            return None
        verifier = models.Verifier(
            bytes(row["salt"]), row["iterations"], bytes(row["stored_key"]),
            bytes(row["server_key"]),
        )  # fmt: skip
        return row["id"], verifier

    async def login_verified(
        self, client_id: int, instance_id: int, *, timing: Timing | None = None
    ) -> models.ClientInfo:
        """Open the session of a client whose proof was checked. NotAuthorised when it
        was disabled meanwhile; ClientOnline as ``login``."""
        row = await self._call("courier_login_v2($1, $2)", client_id, instance_id, timing=timing)
        return _client(row)

    async def set_secret(
        self, actor_id: int, client_id: int, verifier: models.Verifier, *,
        timing: Timing | None = None,
    ) -> None:  # fmt: skip
        """Replace the client's verifier: its own, or anyone's for an admin.
        NotAuthorised, ClientNotFound, BadRequest (a weak verifier)."""
        await self._call(
            "courier_set_secret_v1($1, $2, $3, $4, $5, $6)",
            actor_id, client_id, *_verifier_columns(verifier),
            timing=timing,
        )  # fmt: skip

    async def is_admin(self, client_id: int, *, timing: Timing | None = None) -> bool:
        """Whether the client is an admin (and not disabled)."""
        row = await self._call(
            "courier_is_admin_v1($1) AS a(admin), (SELECT 0::bigint AS exec_ns) e", client_id,
            timing=timing,
        )  # fmt: skip
        return bool(row["admin"])

    async def set_client_enabled(
        self, actor_id: int, client_id: int, enabled: bool, *, timing: Timing | None = None
    ) -> None:
        """An admin disables (ending its session) or enables a client. NotAuthorised,
        ClientNotFound."""
        await self._call(
            "courier_set_client_enabled_v1($1, $2, $3)", actor_id, client_id, enabled,
            timing=timing,
        )  # fmt: skip

    async def disabled_clients(self, client_ids: Sequence[int]) -> list[int]:
        """Which of these clients are disabled (their notices may have been missed)."""
        rows = await self._call_many("courier_disabled_clients_v1($1)", list(client_ids))
        return [row["client_id"] for row in rows]

    async def get_client(
        self, client: int | str, *, timing: Timing | None = None
    ) -> models.ClientInfo:
        """By id (int) or name (str). ClientNotFound."""
        client_id, name = _id_or_name(client)
        row = await self._call("courier_get_client_v1($1, $2)", client_id, name, timing=timing)
        return _client(row)

    async def login(
        self, client: int | str, instance_id: int, *, timing: Timing | None = None
    ) -> models.ClientInfo:
        """ClientNotFound; ClientOnline if a live session exists (on any instance)."""
        client_id, name = _id_or_name(client)
        row = await self._call(
            "courier_login_v1($1, $2, $3)", client_id, name, instance_id, timing=timing
        )
        return _client(row)

    async def logout(
        self, client_id: int, instance_id: int, *, timing: Timing | None = None
    ) -> None:
        """Ends the session if this instance holds it; otherwise does nothing. The
        client's non-durable subscriptions through this instance end with it."""
        await self._call("courier_logout_v2($1, $2)", client_id, instance_id, timing=timing)

    # -- instances -------------------------------------------------------------
    async def register_instance(
        self,
        address: str,
        *,
        timing: Timing | None = None,
        ttl_seconds: float = DEFAULT_INSTANCE_TTL,
    ) -> models.Instance:
        """A new registry entry; it counts as live while its heartbeat is younger
        than ttl_seconds. It watches the queues it waits on (``watch_queue``)."""
        row = await self._call(
            "courier_register_instance_v2($1, $2)", address, ttl_seconds, timing=timing
        )
        return models.Instance(row["id"], row["address"], row["started_at"], row["heartbeat_at"])

    async def watch_queue(
        self,
        queue_id: int,
        seconds: float,
        *,
        wait_ms: int = WATCH_WAIT_MS,
        timing: Timing | None = None,
    ) -> bool:
        """From now on, and for ``seconds`` at least, what is stored in the queue is
        announced on the notification channel; a read after this call sees whatever
        was stored before it (migration 0034). False if the watch could not be made
        within ``wait_ms`` (sends to the queue kept it waiting); True, and nothing
        done, for a queue that does not exist."""
        row = await self._call(
            "courier_watch_queue_v1($1, $2, $3)", queue_id, seconds, wait_ms, timing=timing
        )
        return bool(row["watched"])

    async def heartbeat(self, instance_id: int, *, timing: Timing | None = None) -> None:
        """InternalError if the instance is not registered (it expired: register again)."""
        await self._call("courier_heartbeat_v1($1)", instance_id, timing=timing)

    async def list_instances(self, *, timing: Timing | None = None) -> list[models.Instance]:
        """Live instances only (heartbeat younger than their ttl)."""
        row = await self._call("courier_list_instances_v1()", timing=timing)
        columns = (row["ids"], row["addresses"], row["started_ats"], row["heartbeat_ats"])
        return [models.Instance(*fields) for fields in zip(*columns, strict=True)]

    async def expire_instances(self, *, timing: Timing | None = None) -> list[int]:
        """Delete instances whose heartbeat is older than their own ttl, releasing
        their sessions and leases."""
        row = await self._call("courier_expire_instances_v2()", timing=timing)
        return list(row["ids"])

    async def reap_instances(self, instance_id: int, *, timing: Timing | None = None) -> list[int]:
        """Delete the other instances that are gone (their liveness lock is free),
        releasing their sessions and leases; their ids."""
        row = await self._call("courier_reap_instances_v1($1)", instance_id, timing=timing)
        return list(row["ids"])

    async def unregister_instance(self, instance_id: int, *, timing: Timing | None = None) -> None:
        """Graceful stop: releases the instance's sessions and removes it."""
        await self._call("courier_unregister_instance_v1($1)", instance_id, timing=timing)

    # -- queues ----------------------------------------------------------------
    async def create_queue(
        self,
        name: str,
        *,
        creator: int | None = None,
        max_queues: int | None = None,
        timing: Timing | None = None,
    ) -> models.Queue:
        """QueueExists; BadRequest on an empty name; QuotaExceeded when ``creator``
        already created ``max_queues`` queues (no creator: no quota)."""
        row = await self._call(
            "courier_create_queue_v2($1, $2, $3)", name, creator, max_queues, timing=timing
        )
        return models.Queue(row["id"], row["name"], row["message_count"])

    async def delete_queue(
        self,
        queue_id: int,
        *,
        if_empty: bool = False,
        actor: int | None = None,
        timing: Timing | None = None,
    ) -> None:
        """QueueNotFound; QueueNotEmpty when if_empty and messages remain; with an
        ``actor``, NotAuthorised unless it owns the queue or is an admin."""
        if actor is None:
            await self._call("courier_delete_queue_v1($1, $2)", queue_id, if_empty, timing=timing)
            return
        await self._call(
            "courier_delete_queue_v2($1, $2, $3)", actor, queue_id, if_empty, timing=timing
        )

    async def get_queue(self, queue: int | str, *, timing: Timing | None = None) -> models.Queue:
        """By id or name, with message_count (at most MESSAGE_COUNT_CAP). QueueNotFound."""
        queue_id, name = _id_or_name(queue)
        row = await self._call(
            "courier_get_queue_v2($1, $2, $3)", queue_id, name, MESSAGE_COUNT_CAP, timing=timing
        )
        return models.Queue(row["id"], row["name"], row["message_count"])

    async def list_queues(self, *, timing: Timing | None = None) -> list[models.Queue]:
        """All queues ordered by id, with message counts (each at most MESSAGE_COUNT_CAP)."""
        return _queues(
            await self._call("courier_list_queues_v2($1)", MESSAGE_COUNT_CAP, timing=timing)
        )

    # -- topics ----------------------------------------------------------------
    async def create_topic(
        self, name: str, *, creator: int | None = None, timing: Timing | None = None
    ) -> models.Topic:
        """TopicExists; BadRequest on an empty name."""
        row = await self._call("courier_create_topic_v1($1, $2)", name, creator, timing=timing)
        return models.Topic(row["id"], row["name"])

    async def delete_topic(
        self, topic: int | str, *, actor: int | None = None, timing: Timing | None = None
    ) -> None:
        """Deletes its subscriptions, their queues and messages too. TopicNotFound;
        with an ``actor``, NotAuthorised unless it owns the topic or is an admin."""
        if actor is None:
            await self._call("courier_delete_topic_v1($1, $2)", *_id_or_name(topic), timing=timing)
            return
        await self._call(
            "courier_delete_topic_v2($1, $2, $3)", actor, *_id_or_name(topic), timing=timing
        )

    async def get_topic(self, topic: int | str, *, timing: Timing | None = None) -> models.Topic:
        """By id or name, with its subscriptions and their backlogs. TopicNotFound."""
        rows = await self._call_many(
            "courier_topics_v1($1, $2, $3)", *_id_or_name(topic), MESSAGE_COUNT_CAP, timing=timing
        )
        return topic_rows.topics(rows)[0]

    async def list_topics(self, *, timing: Timing | None = None) -> list[models.Topic]:
        """Every topic by id, with its subscriptions and their backlogs."""
        rows = await self._call_many(
            "courier_topics_v1(NULL, NULL, $1)", MESSAGE_COUNT_CAP, timing=timing
        )
        return topic_rows.topics(rows)

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
        """A new subscription and its queue, or the durable one of that name resumed.
        TopicNotFound; QueueExists on another clash of names; QuotaExceeded;
        NotAuthorised when the durable one of that name is another client's."""
        row = await self._call(
            "courier_subscribe_v1($1, $2, $3, $4, $5, $6, $7)",
            subscriber_id, *_id_or_name(topic), name, durable, instance_id, max_queues,
            timing=timing,
        )  # fmt: skip
        return topic_rows.subscription(row)

    async def unsubscribe(
        self, queue_id: int, *, actor: int | None = None, timing: Timing | None = None
    ) -> None:
        """Ends the subscription with this queue, deleting the queue. QueueNotFound;
        with an ``actor``, NotAuthorised unless it is the subscriber, the topic's
        owner or an admin."""
        if actor is None:
            await self._call("courier_unsubscribe_v1($1)", queue_id, timing=timing)
            return
        await self._call("courier_unsubscribe_v2($1, $2)", actor, queue_id, timing=timing)

    async def publish(
        self,
        sender_id: int,
        topic: int | str,
        body: bytes,
        *,
        receiver: int | None = None,
        priority: int = models.DEFAULT_PRIORITY,
        context: int | None = None,
        options: SendOptions = PLAIN_SEND,
        timing: Timing | None = None,
    ) -> list[tuple[int, int]]:
        """A copy in every subscription's queue, all or none: (queue id, message id)
        per copy, by queue id; empty without subscriptions. TopicNotFound, and the
        failures of ``send``. Every copy carries ``options.properties``."""
        self._check_message(body, priority)
        check_properties(options.properties)
        row = await self._call(
            "courier_publish_v3($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
            sender_id, *_id_or_name(topic), body, receiver, priority, context,
            self.limits.max_body_bytes, options.delay_ms, options.ttl_ms, options.dedup_id,
            self._dedup_window_ms, jsonb.dumps(options.properties), options.persistent,
            timing=timing,
        )  # fmt: skip
        return list(zip(row["queue_ids"], row["message_ids"], strict=True))

    async def commit(
        self,
        client_id: int,
        operations: Sequence[transactions.Operation],
        *,
        timing: Timing | None = None,
    ) -> list[list[int]]:
        """Apply the operations in order, all or none; per operation the ids it
        stored. The first failure undoes everything and is raised as its own error,
        naming the operation (numbered from 1)."""
        for number, operation in enumerate(operations, 1):
            if not isinstance(operation, transactions.AckOperation):
                try:
                    self._check_message(operation.body, operation.priority)
                    check_properties(operation.properties)
                except errors.CourierError as exc:
                    raise errors.in_transaction(number, exc) from None
        rows = await self._call_many(
            "courier_commit_v3($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13,"
            " $14, $15, $16, $17, $18)",
            client_id, *transactions.arguments(operations), self.limits.max_body_bytes,
            self._dedup_window_ms,
            timing=timing,
        )  # fmt: skip
        return [list(row["message_ids"]) for row in sorted(rows, key=lambda r: r["operation"])]

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
        options: SendOptions = PLAIN_SEND,
        timing: Timing | None = None,
    ) -> list[int]:
        """One independent copy per queue, atomically; ids in queue_ids order.
        QueueNotFound (nothing stored), InvalidPriority, PayloadTooLarge, BadRequest
        (no queues), NotAuthorised (read-only sender). ``options`` delays, expires or
        deduplicates the message (see SendOptions)."""
        self._check_message(body, priority)
        check_properties(options.properties)
        row = await self._call(
            "courier_send_v4($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
            sender_id, list(queue_ids), body, receiver, priority, context,
            self.limits.max_body_bytes, options.delay_ms, options.ttl_ms, options.dedup_id,
            self._dedup_window_ms, jsonb.dumps(options.properties), options.persistent,
            timing=timing,
        )  # fmt: skip
        return list(row["message_ids"])

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
        """Peek or pop one visible message (receiver NULL or reader).
        BadRequest (neither queue nor sender), QueueNotFound, QueueEmpty (a queue was
        given and nothing in it is visible), NoMessage (sender-only read found none).
        A pop with a lease keeps the message, invisible, until it is acknowledged.
        With a selector, only a message it matches."""
        call, selective = _read_call("courier_read_v3", "courier_read_v4", selector)
        row = await self._call(
            call, reader_id, queue_id, sender_id, str(order), pop,
            lease.ms if lease else 0, lease.instance_id if lease else None, *selective,
            timing=timing,
        )  # fmt: skip
        return _message(row)

    async def exchange(self, operations: Sequence[Operation]) -> BatchOutcome[Any]:
        """Carry out many acks, sends, reads and queue requests in one call and one
        commit: the queues to create go first, then the acks, then the plain sends
        are stored together, then the sends with options one by one, then the batch
        sends, then the pops by queue are taken together, queue by queue in the order
        of their first pop, then the other reads (leased pops among them) run one by
        one, then the batch reads, then the listings of queues for a reader, and the
        deletes of queues last. Each operation gets its own answer (ids for a send, a
        message for a read, a list for a batch, a queue or a list of them) or its own
        error: a bad send stores nothing and a bad read (a missing queue) is undone,
        and neither fails another. A create or a delete that would have to wait for
        a lock, or the delete of a queue with many messages, is left out of the call:
        its answer is ``LEFT_OUT``, and its caller runs it alone (migration 0033)."""
        numbered = list(enumerate(operations, 1))
        acks = _AckNumbers(numbered)
        function, arguments = self._exchange_arguments(numbered, acks)
        # An empty array goes as NULL, which the function reads as empty: asyncpg
        # checks each array it encodes against three abstract base classes, in Python.
        nulled = [None if type(value) is list and not value else value for value in arguments]
        rows = await self._call_many(_exchange_call(function, len(nulled)), *nulled)
        # The call has committed: from here on nothing may raise, or the batcher would
        # run the batch again and store its sends twice. A request the database left
        # unanswered, or answered with a broken row, fails alone.
        answers = _Answers(operations)
        for row in rows:
            slot = acks.slots.get(row["request"])
            if slot is not None:
                answers.settle(*slot, row)
            else:
                answers.take(row["request"] - 1, row)
        return BatchOutcome(answers.finished(), max((row["exec_ns"] for row in rows), default=0))

    def _exchange_arguments(
        self, numbered: Sequence[tuple[int, Operation]], acks: _AckNumbers
    ) -> tuple[str, list[Any]]:
        """The stored function an exchange calls, and its arguments in their order."""
        sends = [(n, op) for n, op in numbered if isinstance(op, SendRequest) and op.options.plain]
        option_sends = sorted(
            ((n, op) for n, op in numbered if isinstance(op, SendRequest) and not op.options.plain),
            key=_dedup_lock_order,
        )
        reads = [(n, op) for n, op in numbered if isinstance(op, ReadRequest)]
        groups: dict[tuple[int, models.Order], list[tuple[int, PopRequest]]] = {}
        for n, op in numbered:
            if isinstance(op, PopRequest):
                groups.setdefault((op.queue_id, op.order), []).append((n, op))
        pops = [numbered_pop for group in groups.values() for numbered_pop in group]
        copies = [(k, queue) for k, (_, send) in enumerate(sends, 1) for queue in send.queue_ids]
        arguments = [
            [n for n, _ in sends],
            [send.sender_id for _, send in sends],
            [send.body for _, send in sends],
            [send.receiver for _, send in sends],
            [send.priority for _, send in sends],
            [send.context for _, send in sends],
            [send.options.persistent for _, send in sends],
            [k for k, _ in copies],
            [queue for _, queue in copies],
            self.limits.max_body_bytes,
            [n for n, _ in pops],
            [pop.queue_id for _, pop in pops],
            [str(pop.order) for _, pop in pops],
            [pop.reader_id for _, pop in pops],
            [n for n, _ in reads],
            [read.reader_id for _, read in reads],
            [read.queue_id for _, read in reads],
            [read.sender_id for _, read in reads],
            [str(read.order) for _, read in reads],
            [read.pop for _, read in reads],
            [read.lease_ms for _, read in reads],
            [read.instance_id for _, read in reads],
            acks.numbers,
            acks.holders,
            acks.deliveries,
        ]  # fmt: skip
        send_groups = [_send_group(n, op) for n, op in numbered if isinstance(op, SendManyRequest)]
        pop_groups = [_pop_group(n, op) for n, op in numbered if isinstance(op, PopManyRequest)]
        arguments += [[_option_send(n, send) for n, send in option_sends],
                      self._dedup_window_ms, send_groups, pop_groups]  # fmt: skip
        # Without queue requests v7 would only pass everything to v6, through one
        # more set of rows: 11 µs of database CPU on a call of 8 sends and 8 pops.
        queue_columns = _QueueColumns(numbered)
        function = "courier_exchange_v6"
        if queue_columns.any():
            function = "courier_exchange_v7"
            arguments += queue_columns.arguments()
        return function, arguments

    async def send_each(self, sends: Sequence[SendRequest]) -> BatchOutcome[list[int]]:
        """Store independent sends in one call and one commit (see ``exchange``)."""
        return await self.exchange(sends)

    async def pop_each(
        self, queue_id: int, order: models.Order, reader_ids: Sequence[int]
    ) -> BatchOutcome[models.Message]:
        """One pop per reader from one queue, in one call and one commit; each gets a
        message, QueueEmpty, or the queue's error."""
        return await self.exchange([PopRequest(reader, queue_id, order) for reader in reader_ids])

    # -- batches of one client ---------------------------------------------------
    async def send_many(
        self,
        sender_id: int,
        queue_ids: Sequence[int],
        drafts: Sequence[models.Draft],
        *,
        timing: Timing | None = None,
    ) -> list[list[int]]:
        """Store every draft in each queue, all or none, in order; per draft its ids
        (in queue_ids order). The first bad draft fails the batch with its error,
        which names the draft's number; nothing is stored then."""
        self._check_drafts(drafts)
        rows = await self._call_many(
            "courier_send_many_v3($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
            sender_id, list(queue_ids), *_draft_columns(drafts), self.limits.max_body_bytes,
            self._dedup_window_ms,
            timing=timing,
        )  # fmt: skip
        return [list(row["message_ids"]) for row in rows]

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
        """Pop up to ``count`` messages visible to the reader, in read order; an empty
        list when there are none. QueueNotFound. With a lease, as ``read``; with a
        selector, only messages it matches."""
        call, selective = _read_call("courier_pop_many_v2", "courier_pop_many_v3", selector)
        rows = await self._call_many(
            call, reader_id, queue_id, sender_id, str(order), count,
            lease.ms if lease else 0, lease.instance_id if lease else None, *selective,
            timing=timing,
        )  # fmt: skip
        return [_message(row) for row in rows]

    async def ack_many(
        self, holder_id: int, delivery_ids: Sequence[int], *, timing: Timing | None = None
    ) -> list[models.Settled]:
        """Acknowledge each delivery; each gets its own result (LEASE_EXPIRED when it
        is not held), in order."""
        outcome = await self.exchange([AckManyRequest(holder_id, tuple(delivery_ids))])
        if timing is not None:
            timing.exec_ns = outcome.exec_ns
        (answer,) = outcome.answers
        if isinstance(answer, errors.CourierError):
            raise answer
        settled: list[models.Settled] = answer
        return settled

    async def nack_many(
        self,
        holder_id: int,
        delivery_ids: Sequence[int],
        *,
        delay_ms: int = 0,
        reason: str | None = None,
        timing: Timing | None = None,
    ) -> list[models.Settled]:
        """Give each delivery back as ``nack`` does; each gets its own result."""
        rows = await self._call_many(
            "courier_nack_many_v1($1, $2, $3, $4)", holder_id, list(delivery_ids), delay_ms,
            reason, timing=timing,
        )  # fmt: skip
        return [
            models.Settled(delivery_ids[row["request"] - 1], row["status"], row["message"])
            for row in rows
        ]

    async def pop_response(
        self, reader_id: int, queue_id: int, context: int, *, timing: Timing | None = None
    ) -> models.Message:
        """Pop the message in queue addressed to reader with this context.
        QueueNotFound; NoMessage."""
        row = await self._call(
            "courier_pop_response_v3($1, $2, $3)", reader_id, queue_id, context, timing=timing
        )
        return _message(row)

    async def queues_for_me(
        self, reader_id: int, *, timing: Timing | None = None
    ) -> list[models.Queue]:
        """Queues (sorted by id) holding a message the reader could read;
        message_count is the number of messages visible to the reader there (at most
        MESSAGE_COUNT_CAP)."""
        return _queues(
            await self._call(
                "courier_queues_for_me_v2($1, $2)", reader_id, MESSAGE_COUNT_CAP, timing=timing
            )
        )

    # -- leases and dead letters ------------------------------------------------
    async def ack(self, holder_id: int, delivery_id: int, *, timing: Timing | None = None) -> None:
        """The leased message is done: delete it. LeaseExpired when it is no longer held."""
        await self._call("courier_ack_v1($1, $2)", holder_id, delivery_id, timing=timing)

    async def nack(
        self,
        holder_id: int,
        delivery_id: int,
        *,
        delay_ms: int = 0,
        reason: str | None = None,
        timing: Timing | None = None,
    ) -> str:
        """Give the leased message back: visible again after the delay, or a dead letter
        after its queue's max_deliveries. Returns 'visible', 'delayed', 'dead' or
        'dropped'. LeaseExpired when it is no longer held."""
        row = await self._call(
            "courier_nack_v1($1, $2, $3, $4)", holder_id, delivery_id, delay_ms, reason,
            timing=timing,
        )  # fmt: skip
        return str(row["outcome"])

    async def extend(
        self, holder_id: int, delivery_id: int, lease_ms: int, *, timing: Timing | None = None
    ) -> None:
        """The lease now ends lease_ms from now. LeaseExpired when it is no longer held."""
        await self._call(
            "courier_extend_v1($1, $2, $3)", holder_id, delivery_id, lease_ms, timing=timing
        )

    async def give_back(
        self, reader_id: int, message: models.Message, *, timing: Timing | None = None
    ) -> None:
        """Undo the pop that took ``message`` for a reader who gave up: a lease is
        released uncounted, a plain pop's message is stored again as it was."""
        if message.delivery is not None:
            await self._call(
                "courier_unlease_v1($1, $2)", reader_id, message.delivery, timing=timing
            )
            return
        await self._call(
            "courier_restore_v2($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
            message.id, message.queue, message.sender, message.receiver, message.context,
            message.priority, message.created_at, message.body, message.deliveries,
            message.dead_from, message.failure, jsonb.dumps(message.properties),
            timing=timing,
        )  # fmt: skip

    async def release_leases(
        self, holder_id: int, instance_id: int, *, timing: Timing | None = None
    ) -> int:
        """Give back every lease the client holds through this instance; how many."""
        row = await self._call(
            "courier_release_leases_v1($1, $2, $3)", holder_id, instance_id,
            "the connection closed", timing=timing,
        )  # fmt: skip
        return int(row["released"])

    async def configure_queue(
        self,
        settings: models.QueueSettings,
        *,
        actor: int | None = None,
        timing: Timing | None = None,
    ) -> models.QueueSettings:
        """Set how the queue treats failing messages, and its limits. QueueNotFound,
        BadRequest; with an ``actor``, NotAuthorised unless it owns the queue or is an
        admin."""
        placeholders = ", ".join(f"${k}" for k in range(1, 8 if actor is None else 9))
        row = await self._call(
            f"courier_configure_queue_v{2 if actor is None else 3}({placeholders})",
            *([] if actor is None else [actor]), settings.queue, settings.max_deliveries,
            settings.dead_letter_queue, settings.dead_letter_expired, settings.max_messages,
            settings.max_bytes, settings.overflow.value,
            timing=timing,
        )  # fmt: skip
        return models.QueueSettings(
            row["queue_id"], row["max_deliveries"], row["dead_letter_queue_id"],
            row["dead_letter_expired"], row["max_messages"], row["max_bytes"],
            models.Overflow(row["overflow"]),
        )  # fmt: skip

    async def set_queue_acl(
        self, actor: int, acl: models.QueueAcl, *, timing: Timing | None = None
    ) -> models.QueueAcl:
        """Set both access lists of the queue (None: anyone). QueueNotFound,
        ClientNotFound, BadRequest; NotAuthorised unless ``actor`` owns the queue or is
        an admin."""
        row = await self._call(
            "courier_set_queue_acl_v1($1, $2, $3, $4)", actor, acl.queue,
            None if acl.senders is None else list(acl.senders),
            None if acl.readers is None else list(acl.readers),
            timing=timing,
        )  # fmt: skip
        return _queue_acl(row)

    async def queue_acl(
        self, actor: int, queue_id: int, *, timing: Timing | None = None
    ) -> models.QueueAcl:
        """The queue's access lists. QueueNotFound; NotAuthorised unless ``actor`` owns
        the queue or is an admin."""
        row = await self._call("courier_queue_acl_v1($1, $2)", actor, queue_id, timing=timing)
        return _queue_acl(row)

    async def sweep(self, limit: int, *, timing: Timing | None = None) -> Sweep:
        """Return due held messages to their queues, expire messages past their ttl,
        forget old dedup ids; ``next_due`` is when something falls due next."""
        row = await self._call(
            "courier_sweep_v1($1, $2)", limit, self._dedup_window_ms, timing=timing
        )
        return Sweep(row["returned"], row["expired"], row["next_due"])

    @property
    def _dedup_window_ms(self) -> int:
        return round(self.limits.dedup_window * 1000)

    # -- nodes (docs/architecture.md, *Nodes*) -----------------------------------
    async def queue_home(self, name: str, *, timing: Timing | None = None) -> int | None:
        """On the control node: the node holding the queue of that name, if any."""
        row = await self._call("courier_queue_home_v1($1)", name, timing=timing)
        home: int | None = row["node_id"]
        return home

    async def place_queue(self, *, timing: Timing | None = None) -> int:
        """On the control node: the active node a new queue goes to."""
        row = await self._call("courier_place_queue_v1()", timing=timing)
        node: int = row["node_id"]
        return node

    async def reserve_queue_home(
        self, name: str, node_id: int, *, timing: Timing | None = None
    ) -> None:
        """On the control node: claim a queue name for another node. QueueExists."""
        await self._call("courier_reserve_queue_home_v1($1, $2)", name, node_id, timing=timing)

    async def release_queue_home(
        self, name: str, node_id: int, *, timing: Timing | None = None
    ) -> None:
        """On the control node: give up the claim of ``reserve_queue_home``."""
        await self._call("courier_release_queue_home_v1($1, $2)", name, node_id, timing=timing)

    async def adopt_client(
        self, client: models.ClientInfo, *, timing: Timing | None = None
    ) -> None:
        """On a node other than the control node: keep a copy of the client."""
        admin = client.mode is models.ClientMode.ADMIN
        mode = models.ClientMode.READ_WRITE if admin else client.mode
        await self._call(
            "courier_adopt_client_v1($1, $2, $3, $4)", client.id, client.name, str(mode), admin,
            timing=timing,
        )  # fmt: skip

    async def release_instances(
        self, instance_ids: Sequence[int], *, timing: Timing | None = None
    ) -> int:
        """Give back the leases taken through these (gone) middleware instances."""
        row = await self._call(
            "courier_release_instances_v1($1)", list(instance_ids), timing=timing
        )
        released: int = row["released"]
        return released

    # -- replicated queues, on the control node (docs/nodes.md) ------------------
    async def place_replicas(self, replicas: int, *, timing: Timing | None = None) -> list[int]:
        """The nodes for the members of a new replicated queue. BadRequest when the
        cluster has fewer active nodes than ``replicas``."""
        rows = await self._call_many("courier_place_replicas_v1($1)", replicas, timing=timing)
        return [row["node_id"] for row in rows]

    async def create_replicated(
        self,
        name: str,
        policy: models.Policy,
        creator: int | None,
        min_members: int = 1,
        *,
        timing: Timing | None = None,
    ) -> int:
        """A replicated queue without members yet, keeping at least ``min_members``;
        its id. QueueExists, BadRequest."""
        row = await self._call(
            "courier_create_replicated_v1($1, $2, $3, $4)", name, str(policy), creator,
            min_members, timing=timing,
        )  # fmt: skip
        replicated_id: int = row["id"]
        return replicated_id

    async def add_replica(
        self, replicated_id: int, replica: models.Replica, *, timing: Timing | None = None
    ) -> None:
        await self._call(
            "courier_add_replica_v1($1, $2, $3, $4, $5)", replicated_id, replica.member,
            replica.queue, replica.queue_name, replica.node, timing=timing,
        )  # fmt: skip

    async def drop_replicated(self, replicated_id: int, *, timing: Timing | None = None) -> None:
        await self._call("courier_drop_replicated_v1($1)", replicated_id, timing=timing)

    async def replicated(
        self, name: str, *, timing: Timing | None = None
    ) -> models.ReplicatedQueue:
        """Its members with their producers and consumers (lengths 0: the members'
        nodes know those). QueueNotFound."""
        rows = await self._call_many("courier_replicated_v1($1)", name, timing=timing)
        members = tuple(
            models.Replica(
                row["member_no"],
                row["queue_id"],
                row["queue_name"],
                row["node_id"],
                row["producers"],
                row["consumers"],
            )
            for row in rows
        )
        first = rows[0]
        return models.ReplicatedQueue(
            first["id"], first["name"], models.Policy(first["policy"]), members
        )

    async def join_replicated(
        self, name: str, client_id: int, instance_id: int, role: models.Role, *,
        timing: Timing | None = None,
    ) -> models.Place:  # fmt: skip
        """The member the queue's policy gives this producer or consumer. QueueNotFound."""
        row = await self._call(
            "courier_join_replicated_v1($1, $2, $3, $4)", name, client_id, instance_id,
            str(role), timing=timing,
        )  # fmt: skip
        return models.Place(
            row["place_id"], row["member_no"], row["queue_id"], row["queue_name"], row["replicas"]
        )

    async def leave_replicated(
        self, place_id: int, client_id: int, *, timing: Timing | None = None
    ) -> bool:
        """Give up a place; False when it was no longer held (or not the client's)."""
        row = await self._call(
            "courier_leave_replicated_v1($1, $2)", place_id, client_id, timing=timing
        )
        left: bool = row["left_place"]
        return left

    # -- the provisioning controller, on the control node -------------------------
    async def cluster_nodes(self) -> list[nodes.Node]:
        """Each node the control node lists (none: a cluster of node 1 alone)."""
        rows = await self._call_many("courier_nodes_v1()")
        return [nodes.Node(row["id"], row["dsn"], row["state"], row["capacity"]) for row in rows]

    async def report_counts(self, instance_id: int, counts: dict[int, tuple[int, int]]) -> None:
        """This middleware's running totals (sent, taken) per queue; members only count."""
        queue_ids = list(counts)
        await self._call(
            "courier_report_counts_v1($1, $2, $3, $4)", instance_id, queue_ids,
            [counts[q][0] for q in queue_ids], [counts[q][1] for q in queue_ids], timing=None,
        )  # fmt: skip

    async def member_queues(self) -> set[int]:
        return {row["queue_id"] for row in await self._call_many("courier_member_queues_v1()")}

    async def member_counts(self) -> dict[int, tuple[int, int]]:
        """Each member queue's totals (sent, taken) over every middleware."""
        rows = await self._call_many("courier_member_counts_v1()")
        return {row["queue_id"]: (row["sent"], row["taken"]) for row in rows}

    async def replicated_names(self) -> list[tuple[str, int]]:
        """Each replicated queue's name and the members it keeps at least."""
        rows = await self._call_many("courier_replicated_names_v1()")
        return [(row["name"], row["min_members"]) for row in rows]

    async def next_member(self, replicated_id: int) -> tuple[int, int | None]:
        """The number of a new member, and the replicated queue's creator (its owner)."""
        row = await self._call("courier_next_member_v1($1)", replicated_id, timing=None)
        return row["member_no"], row["created_by"]

    async def remove_replica(self, replicated_id: int, member: int) -> None:
        """The member drains: no new places go to it; its clients lose theirs."""
        await self._call("courier_remove_replica_v1($1, $2)", replicated_id, member, timing=None)

    async def draining_replicas(self, replicated_id: int) -> list[models.Replica]:
        rows = await self._call_many("courier_draining_replicas_v1($1)", replicated_id)
        return [
            models.Replica(row["member_no"], row["queue_id"], row["queue_name"], row["node_id"])
            for row in rows
        ]

    async def drop_replica(self, replicated_id: int, member: int) -> None:
        """A drained member whose queue is gone leaves the replicated queue."""
        await self._call("courier_drop_replica_v1($1, $2)", replicated_id, member, timing=None)

    async def replicated_to_delete(self, name: str, actor: int | None) -> tuple[int, list[int]]:
        """The replicated queue's id and every member's queue (draining ones too).
        QueueNotFound; NotAuthorised unless ``actor`` created it or is an admin."""
        rows = await self._call_many("courier_replicated_to_delete_v1($1, $2)", name, actor)
        if not rows:  # a replicated queue whose creation was undone: no members
            raise errors.QueueNotFound(f"replicated queue {name} has no members")
        return rows[0]["id"], [row["queue_id"] for row in rows]

    async def record_decision(self, replicated: str, decision: Any) -> None:
        """Keep one of the controller's decisions (a ``courier.controller.Decision``)."""
        await self._call(
            "courier_record_decision_v1($1, $2, $3, $4, $5, $6, $7, $8, $9)", replicated,
            decision.kind, decision.member, decision.node, decision.moved, decision.clients,
            decision.capacity, decision.load, decision.length, timing=None,
        )  # fmt: skip

    # -- moving messages between nodes (courier.db.transfers) -------------------
    async def transfer_out(
        self, transfer_id: int, source_queue: int, target_queue: int, count: int
    ) -> list[Any]:
        """Step 1: up to ``count`` of the oldest visible messages into the outbox."""
        return await self._call_many(
            "courier_transfer_out_v1($1, $2, $3, $4)", transfer_id, source_queue, target_queue,
            count,
        )  # fmt: skip

    async def drain_queue(
        self, transfer_id: int, source_queue: int, target_queue: int
    ) -> tuple[int, bool]:
        """Every visible message of a draining member into the outbox, and the queue
        deleted with them once nothing of it is held: (moved, dropped)."""
        row = await self._call(
            "courier_drain_queue_v1($1, $2, $3)", transfer_id, source_queue, target_queue,
            timing=None,
        )  # fmt: skip
        return row["moved"], row["dropped"]

    async def outbox_rows(self, transfer_id: int) -> list[Any]:
        return await self._call_many("courier_outbox_rows_v1($1)", transfer_id)

    async def pending_transfers(self) -> list[Any]:
        """The outbox rows of every unfinished transfer of this node."""
        return await self._call_many("courier_pending_transfers_v1()")

    async def transfer_in(self, transfer_id: int, target_queue: int, rows: Sequence[Any]) -> int:
        """Step 2: store the rows in the target queue, once per transfer id. QueueNotFound."""
        columns = [[row[name] for row in rows] for name in TRANSFER_COLUMNS]
        row = await self._call(
            "courier_transfer_in_v1($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13,"
            " $14::jsonb[], $15)",
            transfer_id, target_queue, *columns, timing=None,
        )  # fmt: skip
        received: int = row["received"]
        return received

    async def transfer_done(self, transfer_id: int) -> None:
        await self._call("courier_transfer_done_v1($1)", transfer_id, timing=None)

    async def transfer_back(self, transfer_id: int) -> int:
        """The outbox rows back to their own queue (the target is gone)."""
        row = await self._call("courier_transfer_back_v1($1)", transfer_id, timing=None)
        returned: int = row["returned"]
        return returned

    async def forget_transfers(self, older_than_s: float) -> None:
        await self._call("courier_forget_transfers_v1($1)", older_than_s, timing=None)

    # -- the one call path -----------------------------------------------------
    async def _call(self, function_call: str, *args: Any, timing: Timing | None) -> Any:
        """Run ``SELECT * FROM <function_call>`` for its one row; translate failures and
        bad statuses."""
        row = (await self._call_many(function_call, *args, timing=timing))[0]
        status = row.get("status")
        if status:
            _translate.check_status(status)
        return row

    async def _call_many(
        self, function_call: str, *args: Any, timing: Timing | None = None
    ) -> list[Any]:
        """Run ``SELECT * FROM <function_call>`` for all its rows (``_call_once``). A
        call the database aborted over a conflict with another (to break a deadlock)
        applied nothing, being one statement in a transaction of its own: it runs
        again after a short pause, up to ``len(CONFLICT_PAUSES_S)`` times, and is
        then UNAVAILABLE."""
        for pause_s in CONFLICT_PAUSES_S:
            try:
                return await self._call_once(function_call, *args, timing=timing)
            except _translate.ConflictAborted as exc:
                log.info("the database aborted a call over a conflict; trying again: %s", exc)
                await asyncio.sleep(pause_s * random.uniform(0.5, 1.5))
        return await self._call_once(function_call, *args, timing=timing)

    async def _call_once(
        self, function_call: str, *args: Any, timing: Timing | None = None
    ) -> list[Any]:
        """Run ``SELECT * FROM <function_call>`` on a pooled connection (the task's
        kept one, if it keeps one) for all its rows. UNAVAILABLE when no connection
        is free within the acquire timeout, or the database did not answer in time
        (asyncpg has cancelled the statement by then: whether it committed is
        unknown); other failures come out translated. Plain awaits rather than
        context managers: this runs once per database call, and their frames cost a
        middleware about a tenth of a call's own time."""
        started = time.perf_counter_ns()
        kept = _KEPT.get()
        connection = await self._connection_for(kept)
        acquired = time.perf_counter_ns()
        succeeded = False
        try:
            rows: list[Any] = await connection.fetch(
                f"SELECT * FROM {function_call}", *args, timeout=self._statement_timeout
            )
            answered = time.perf_counter_ns()
            succeeded = True
        except _translate.TRANSLATED as exc:
            timed_out = f"the database did not answer within {self._statement_timeout:g}s"
            raise _failure(exc, timed_out) from exc
        finally:
            # A failed call's connection goes back to the pool, which knows how to
            # clean up after a cancelled statement or a broken link.
            if succeeded and _may_keep(kept, self.pool):
                kept.connection = connection
            else:
                await self.pool.release(connection)
        if timing is not None:
            exec_ns = max((row["exec_ns"] for row in rows), default=0)
            timing.spans(started, acquired, answered, exec_ns)
        return rows

    async def _connection_for(self, kept: KeptConnection | None) -> asyncpg.Connection:
        """The kept connection if there is a live one (taken out while in use), else
        one from the pool: UNAVAILABLE when none is free within the acquire timeout."""
        if kept is not None:
            connection, kept.connection = kept.connection, None
            if connection is not None:
                if _is_open(connection) and not kept.closed:
                    kept.calls += 1
                    return connection
                await self.pool.release(connection)  # the pool cleans up after a break
            kept.calls = 0
        try:
            acquired: asyncpg.Connection = await self.pool.acquire(timeout=self._acquire_timeout)
        except _translate.TRANSLATED as exc:
            timed_out = f"no database connection was free within {self._acquire_timeout:g}s"
            raise _failure(exc, timed_out) from exc
        return acquired

    def _check_drafts(self, drafts: Sequence[models.Draft]) -> None:
        if not drafts:
            raise errors.BadRequest("a batch needs at least one message")
        for number, draft in enumerate(drafts, 1):
            try:
                self._check_message(draft.body, draft.priority)
                check_properties(draft.properties)
            except errors.CourierError as exc:
                raise errors.in_batch(number, exc) from None

    def _check_message(self, body: bytes, priority: int) -> None:
        """Cheap checks before the round trip; the stored function repeats them."""
        size = len(body)
        if size > self.limits.max_body_bytes:
            raise errors.PayloadTooLarge(size=size, limit=self.limits.max_body_bytes)
        if not models.MIN_PRIORITY <= priority <= models.MAX_PRIORITY:
            raise errors.InvalidPriority(f"priority {priority} is not from 1 to 10")


def _failure(exc: BaseException, timed_out: str) -> errors.CourierError:
    """What a failed database call raises: UNAVAILABLE saying ``timed_out`` when it
    ran out of time, else the failure translated."""
    if isinstance(exc, TimeoutError):
        return errors.Unavailable(timed_out)
    return _translate.translate(exc)


def _may_keep(kept: KeptConnection | None, pool: asyncpg.Pool) -> TypeGuard[KeptConnection]:
    """Whether a call's connection stays kept: not past its share of calls, and not
    once the repository or the pool is closing (a pool waits for what it lent)."""
    return (
        kept is not None
        and kept.connection is None
        and kept.calls < KEEP_CALLS
        and not kept.closed
        and not pool.is_closing()
    )


def _is_open(connection: asyncpg.Connection) -> bool:
    """Whether a kept connection still works. One the database dropped may have been
    taken back by the pool already, and then cannot even be asked."""
    try:
        return not connection.is_closed()
    except asyncpg.InterfaceError:  # "released back to the pool"
        return False


def check_properties(properties: models.Properties) -> None:
    """BadRequest for properties beyond the protocol's limits. The stored functions
    check only that they are an object: the limits are held here and on the wire."""
    if properties:
        problem = wire_limits.properties_problem(properties)
        if problem:
            raise errors.BadRequest(problem)


@dataclass(frozen=True, slots=True)
class SendRequest:
    """One send as the batched path takes it (the arguments of ``Repository.send``)."""

    sender_id: int
    queue_ids: Sequence[int]
    body: bytes
    receiver: int | None = None
    priority: int = models.DEFAULT_PRIORITY
    context: int | None = None
    options: SendOptions = PLAIN_SEND


@dataclass(frozen=True, slots=True)
class PopRequest:
    """One pop by queue as the batched path takes it."""

    reader_id: int
    queue_id: int
    order: models.Order = models.Order.TIME


@dataclass(frozen=True, slots=True)
class ReadRequest:
    """Any other read (a peek, a pop by sender, a leased pop) as the batched path
    takes it."""

    reader_id: int
    queue_id: int | None
    sender_id: int | None
    order: models.Order
    pop: bool
    lease_ms: int = 0
    instance_id: int | None = None


@dataclass(frozen=True, slots=True)
class AckRequest:
    """One ack as the batched path takes it."""

    holder_id: int
    delivery_id: int


@dataclass(frozen=True, slots=True)
class SendManyRequest:
    """One batch send (the arguments of ``Repository.send_many``)."""

    sender_id: int
    queue_ids: Sequence[int]
    drafts: Sequence[models.Draft]


@dataclass(frozen=True, slots=True)
class PopManyRequest:
    """One batch read (the arguments of ``Repository.pop_many``)."""

    reader_id: int
    queue_id: int
    count: int
    sender_id: int | None = None
    order: models.Order = models.Order.TIME
    lease_ms: int = 0
    instance_id: int | None = None


@dataclass(frozen=True, slots=True)
class AckManyRequest:
    """Many acks by one holder, each answered on its own."""

    holder_id: int
    delivery_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class CreateQueueRequest:
    """One queue to create (the arguments of ``Repository.create_queue``)."""

    name: str
    creator: int | None = None
    max_queues: int | None = None


@dataclass(frozen=True, slots=True)
class DeleteQueueRequest:
    """One queue to delete (the arguments of ``Repository.delete_queue``)."""

    queue_id: int
    if_empty: bool = False
    actor: int | None = None


@dataclass(frozen=True, slots=True)
class ListingRequest:
    """The queues holding a message one reader may read (``Repository.queues_for_me``)."""

    reader_id: int


QueueRequest = CreateQueueRequest | DeleteQueueRequest | ListingRequest

Operation = (
    SendRequest | PopRequest | ReadRequest | AckRequest | SendManyRequest | PopManyRequest
    | AckManyRequest | QueueRequest
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class BatchOutcome(Generic[T]):
    """What a batched call answered: per request a result or its error, and the time
    the database spent on the whole batch."""

    answers: list[T | errors.CourierError]
    exec_ns: int


def _dedup_lock_order(numbered: tuple[int, SendRequest]) -> tuple[int, str]:
    """Sends with a dedup id lock its row: every batch takes them in this order, so
    two batches never wait on each other in a cycle."""
    _, send = numbered
    return send.sender_id, send.options.dedup_id or ""


def _option_send(n: int, send: SendRequest) -> tuple[Any, ...]:
    """A courier_option_send_v3 value."""
    options = send.options
    return (n, send.sender_id, list(send.queue_ids), send.body, send.receiver, send.priority,
            send.context, options.delay_ms, options.ttl_ms, options.dedup_id,
            jsonb.dumps(options.properties), options.persistent)  # fmt: skip


def _draft_columns(drafts: Sequence[models.Draft]) -> tuple[list[Any], ...]:
    """A batch's drafts as the columns courier_send_many_v3 takes."""
    return (
        [draft.body for draft in drafts],
        [draft.receiver for draft in drafts],
        [draft.priority for draft in drafts],
        [draft.context for draft in drafts],
        [draft.delay_ms for draft in drafts],
        [draft.ttl_ms for draft in drafts],
        [draft.dedup_id for draft in drafts],
        [jsonb.dumps(draft.properties) for draft in drafts],
        [draft.persistent for draft in drafts],
    )


def _send_group(n: int, send: SendManyRequest) -> tuple[Any, ...]:
    """A courier_send_group_v3 value."""
    return (n, send.sender_id, list(send.queue_ids), *_draft_columns(send.drafts))


def _pop_group(n: int, pop: PopManyRequest) -> tuple[Any, ...]:
    """A courier_pop_group_v1 value."""
    return (n, pop.reader_id, pop.queue_id, pop.sender_id, str(pop.order), pop.count,
            pop.lease_ms, pop.instance_id)  # fmt: skip


@functools.cache
def _exchange_call(function: str, arguments: int) -> str:
    return f"{function}({', '.join(f'${k}' for k in range(1, arguments + 1))})"


class _QueueColumns:
    """The queue requests of an exchange as courier_exchange_v7's last eleven
    arguments: creates, listings, deletes."""

    def __init__(self, numbered: Sequence[tuple[int, Operation]]) -> None:
        self.creates: list[tuple[int, CreateQueueRequest]] = []
        self.listings: list[tuple[int, ListingRequest]] = []
        self.deletes: list[tuple[int, DeleteQueueRequest]] = []
        for n, op in numbered:
            if isinstance(op, CreateQueueRequest):
                self.creates.append((n, op))
            elif isinstance(op, ListingRequest):
                self.listings.append((n, op))
            elif isinstance(op, DeleteQueueRequest):
                self.deletes.append((n, op))

    def any(self) -> bool:
        return bool(self.creates or self.listings or self.deletes)

    def arguments(self) -> list[Any]:
        creates, listings, deletes = self.creates, self.listings, self.deletes
        return [
            [n for n, _ in creates],
            [create.name for _, create in creates],
            [create.creator for _, create in creates],
            [create.max_queues for _, create in creates],
            [n for n, _ in listings],
            [listing.reader_id for _, listing in listings],
            MESSAGE_COUNT_CAP,
            [n for n, _ in deletes],
            [delete.queue_id for _, delete in deletes],
            [delete.actor for _, delete in deletes],
            [delete.if_empty for _, delete in deletes],
        ]


class _AckNumbers:
    """The acks of an exchange, each with a request number of its own: a single ack
    has its operation's, and each delivery of a batch ack one past the operations',
    which ``slots`` maps back to (operation index, position in its batch)."""

    def __init__(self, numbered: Sequence[tuple[int, Operation]]) -> None:
        self.numbers: list[int] = []
        self.holders: list[int] = []
        self.deliveries: list[int] = []
        self.slots: dict[int, tuple[int, int]] = {}
        spare = len(numbered) + 1
        for n, op in numbered:
            if isinstance(op, AckRequest):
                self._add(n, op.holder_id, op.delivery_id)
            elif isinstance(op, AckManyRequest):
                for position, delivery in enumerate(op.delivery_ids):
                    self.slots[spare] = (n - 1, position)
                    self._add(spare, op.holder_id, delivery)
                    spare += 1

    def _add(self, number: int, holder: int, delivery: int) -> None:
        self.numbers.append(number)
        self.holders.append(holder)
        self.deliveries.append(delivery)


_UNANSWERED = "the database left this request of the batch unanswered"
_MISSING: Any = object()
"""A single request's answer until its row arrives (``_Answers.finished`` makes the
error): most are answered, so the error is not built up front."""


class _Answers:
    """Each operation's answer, gathered from the rows of one exchange."""

    def __init__(self, operations: Sequence[Operation]) -> None:
        self.operations = operations
        self.answers: list[Any] = [_unanswered(op) for op in operations]

    def take(self, index: int, row: Any) -> None:
        operation = self.operations[index]
        try:
            if isinstance(operation, SendManyRequest | PopManyRequest):
                self._gather(index, operation, row)
            else:
                self.answers[index] = _answer(operation, row)
        except errors.CourierError as exc:
            self.answers[index] = exc

    def finished(self) -> list[Any]:
        """The answers, once every row is in: a request no row answered fails, and so
        does a batch send that got fewer ids than it has drafts (it cannot have been
        stored in part: it is one statement)."""
        for index, operation in enumerate(self.operations):
            answer = self.answers[index]
            short = (
                isinstance(operation, SendManyRequest)
                and isinstance(answer, list)
                and len(answer) != len(operation.drafts)
            )
            if answer is _MISSING or short:
                self.answers[index] = errors.InternalError(_UNANSWERED)
        return self.answers

    def settle(self, index: int, position: int, row: Any) -> None:
        settled: list[models.Settled] = self.answers[index]
        settled[position] = models.Settled(
            settled[position].delivery, row["status"], row["message"]
        )

    def _gather(self, index: int, operation: SendManyRequest | PopManyRequest, row: Any) -> None:
        gathered = self.answers[index]
        if isinstance(gathered, errors.CourierError):
            return  # a batch that failed answers with its error alone
        if row["status"]:
            self.answers[index] = _answer(operation, row)
        elif isinstance(operation, SendManyRequest):
            gathered.append(list(row["message_ids"]))
        else:
            gathered.append(_message(row))


def _unanswered(operation: Operation) -> Any:
    """An operation's answer until its rows arrive: a batch read may rightly get none
    (an empty list), every other request must get one."""
    if isinstance(operation, PopManyRequest | SendManyRequest):
        return []
    if isinstance(operation, AckManyRequest):
        return [models.Settled(delivery, errors.Status.INTERNAL, _UNANSWERED)
                for delivery in operation.delivery_ids]  # fmt: skip
    return _MISSING


class _LeftOut:
    def __repr__(self) -> str:
        return "LEFT_OUT"


LEFT_OUT: Any = _LeftOut()
"""The answer ``exchange`` gives a queue request it left out (status LEFT_OUT_STATUS):
run it alone. The exchange never waits for the request in its place, since the
whole batch would wait with it."""
LEFT_OUT_STATUS = -1


def _answer(operation: Operation, row: Any) -> Any:
    status = row["status"]
    if status == LEFT_OUT_STATUS:
        return LEFT_OUT
    if status == errors.Status.PAYLOAD_TOO_LARGE:
        return errors.PayloadTooLarge(row["message"])
    if status:
        return errors.for_status(status, row["message"])
    if isinstance(operation, SendRequest):
        return list(row["message_ids"])
    if isinstance(operation, AckRequest | DeleteQueueRequest):
        return None
    if isinstance(operation, CreateQueueRequest):
        return _created(row)
    if isinstance(operation, ListingRequest):
        return _listing(row)
    return _message(row)


def _created(row: Any) -> models.Queue:
    names = row["names"]
    if row["id"] is None or not names:
        raise errors.InternalError("a create's answer carries no queue")
    return models.Queue(row["id"], names[0], 0)


def _listing(row: Any) -> list[models.Queue]:
    """A listing's queues: their ids travel in message_ids."""
    columns = (row["message_ids"], row["names"], row["counts"])
    if None in columns or len({len(column) for column in columns}) != 1:
        raise errors.InternalError("a listing's answer has columns of unequal length")
    return _queue_list(*columns)


def _id_or_name(key: int | str) -> tuple[int | None, str | None]:
    return (None, key) if isinstance(key, str) else (key, None)


def _verifier_columns(
    verifier: models.Verifier | None,
) -> tuple[bytes | None, int | None, bytes | None, bytes | None]:
    if verifier is None:
        return None, None, None, None
    return verifier.salt, verifier.iterations, verifier.stored_key, verifier.server_key


def _client(row: Any) -> models.ClientInfo:
    return models.ClientInfo(row["id"], row["name"], models.ClientMode(row["mode"]), row["online"])


def _queues(row: Any) -> list[models.Queue]:
    return _queue_list(row["ids"], row["names"], row["message_counts"])


def _queue_list(
    ids: Sequence[int], names: Sequence[str], counts: Sequence[int]
) -> list[models.Queue]:
    return [models.Queue(*fields) for fields in zip(ids, names, counts, strict=True)]


# A message row without these is no message (e.g. a read that found its row gone).
_MESSAGE_REQUIRED = ("id", "queue_id", "sender_id", "priority", "created_at", "body")


def _read_call(
    plain: str, selective: str, selector: selectors.Compiled | None
) -> tuple[str, tuple[str, ...]]:
    """The call of a read's stored function on its seven arguments, and what follows
    them: the plain function without a selector (its plans stay as they were), else
    its selective version with the selector's jsonpath and variables as two more."""
    if selector is None:
        return f"{plain}($1, $2, $3, $4, $5, $6, $7)", ()
    call = f"{selective}($1, $2, $3, $4, $5, $6, $7, $8::text::jsonpath, $9::jsonb)"
    return call, (selector.path, selector.vars)


def _message(row: Any) -> models.Message:
    missing = [column for column in _MESSAGE_REQUIRED if row[column] is None]
    if missing:
        raise errors.InternalError(
            f"the database returned a message row without {', '.join(missing)}"
        )
    return models.Message(
        id=row["id"],
        queue=row["queue_id"],
        sender=row["sender_id"],
        receiver=row["receiver_id"],
        context=row["context"],
        priority=row["priority"],
        created_at=row["created_at"],
        body=row["body"],
        delivery=row["delivery_id"],
        deliveries=row["deliveries"],
        dead_from=row["dead_from"],
        failure=row["failure"],
        properties=jsonb.loads(row["properties"]),
    )


# -- console -------------------------------------------------------------------------
# What the management console (courier.console) needs beyond the operations above.


class ConsoleRepository(Repository):
    """The repository plus the console's admin operations."""

    async def delete_message(self, message_id: int, *, timing: Timing | None = None) -> int:
        """Delete one stored message; returns its queue's id. NoMessage when it is gone
        (popped or deleted a moment earlier: every message leaves exactly once)."""
        row = await self._call("courier_delete_message_v1($1)", message_id, timing=timing)
        return int(row["queue_id"])

    async def redrive(
        self,
        queue_id: int,
        message_ids: Sequence[int] | None = None,
        *,
        timing: Timing | None = None,
    ) -> int:
        """Move dead letters of queue_id back to the queues they failed in (the given
        ones, or all); how many moved."""
        row = await self._call(
            "courier_redrive_v1($1, $2)", queue_id,
            None if message_ids is None else list(message_ids), timing=timing,
        )  # fmt: skip
        return int(row["moved"])


def _queue_acl(row: Any) -> models.QueueAcl:
    senders, readers = row["senders"], row["readers"]
    return models.QueueAcl(
        row["queue_id"],
        None if senders is None else tuple(senders),
        None if readers is None else tuple(readers),
    )
