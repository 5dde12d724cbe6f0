"""The clients of `courier bench chaos`, in one client process: producers and consumers.

A producer sends its numbered messages one after another, each with the dedup id
``"<producer>-<n>"``; when a send fails with an outage (ConnectionLost,
Unavailable, RequestTimeout) its fate is unknown, so the same send is retried with
the same dedup id until it returns ids (*confirmed*) or ``give_up_s`` have passed.

A consumer receives with a lease, "processes" the message (an optional sleep) and
acks it. An ack that fails with an outage is retried until the server answers:
OK (acknowledged), or LeaseExpired, which leaves the first attempt's fate unknown
(*ack unknown*: it may have committed before the connection died). An ack
answered LeaseExpired at the first attempt means the message will come again.

Every message's fate is kept in a ``Ledger`` indexed by message number (all
producers' numbers laid end to end), which the parent adds up over the processes.
Each client also notes its *outages*: from its first failed call to its next
answered one, with the middleware it was using before; the parent matches them to
the kills to measure failover.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import Awaitable, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, TypeVar

import numpy
import numpy.typing

from courier import errors, models
from courier.bench import loop
from courier.client import AsyncClient

T = TypeVar("T")

OUTAGES = (errors.ConnectionLost, errors.Unavailable, errors.RequestTimeout)
"""Failures after which a call's fate is unknown: retried (sends, acks) or skipped."""
RETRY_PAUSE_S = 0.02
RECEIVE_WAIT_S = 1.0
"""A consumer's receive waits this long, then checks whether it should stop."""
PROGRESS_EVERY_S = 0.2
SESSION_POLL_S = 0.002
"""How often a client that lost its connection looks whether it has one again."""
REQUEST_TIMEOUT_S = 10.0
FAILOVER_TIMEOUT_S = 30.0
"""Longer than a dead middleware's ttl, so a client keeps failing over until it is in."""

IdArray = numpy.typing.NDArray[numpy.int64]
CountArray = numpy.typing.NDArray[numpy.uint16]


def counts(messages: int, producers: int) -> list[int]:
    """How many messages each producer sends (the first ones take the remainder)."""
    return [messages // producers + (p < messages % producers) for p in range(producers)]


def offsets(messages: int, producers: int) -> list[int]:
    """Where each producer's numbers start in the ledger."""
    return [sum(counts(messages, producers)[:p]) for p in range(producers)]


def body(producer: int, n: int, size: int) -> bytes:
    head = f"{producer}:{n}:".encode()
    return head + b"." * max(0, size - len(head))


def number(message: models.Message) -> tuple[int, int]:
    producer, n, _ = message.body.split(b":", 2)
    return int(producer), int(n)


@dataclass(frozen=True, slots=True)
class ClientsPlan:
    """One client process's producers and consumers (picklable)."""

    process: str
    slot: int  # this process's place in ``progress``
    servers: tuple[str, ...]
    queue_id: int
    producers: tuple[tuple[int, str], ...]  # (producer number, client name)
    consumers: tuple[tuple[int, str], ...]  # (consumer number, client name)
    messages: int
    producer_count: int
    window: int  # calls each client keeps in flight
    lease_s: float
    process_s: float
    message_size: int
    give_up_s: float
    stop: Any  # multiprocessing Event: the consumers stop once it is set
    progress: Any  # multiprocessing RawArray("q"): per process confirmed, acked, producers done


PROGRESS_FIELDS = 3


@dataclass(frozen=True, slots=True)
class Outage:
    """One client's calls failing, from the first failure to the next answer."""

    client: str
    lost_server: str | None  # the middleware it used before
    started: float  # time.monotonic(), the same clock in every process of the host
    connected: float  # logged in again (the connection never dropped: ``started``)
    ended: float
    server: str | None  # the middleware that answered
    error: str  # the first failure's type


@dataclass(slots=True)
class Ledger:
    """Every message's fate as seen by one process, indexed by message number."""

    size: int
    confirmed_id: IdArray = field(init=False)  # 0: not confirmed (here)
    acked_id: IdArray = field(init=False)  # the id of the first successful ack
    acks: CountArray = field(init=False)  # successful acks
    seen: CountArray = field(init=False)  # deliveries received
    most_deliveries: CountArray = field(init=False)  # highest delivery count received
    sends: int = 0
    retried_sends: int = 0
    unconfirmed: list[int] = field(default_factory=list)
    lease_expired_acks: int = 0
    ack_unknown: dict[int, int] = field(default_factory=dict)  # number -> attempts lost
    redeliveries: collections.Counter[str] = field(default_factory=collections.Counter)
    repeated_acks: list[tuple[int, int, int]] = field(default_factory=list)  # number, ids
    errors: collections.Counter[str] = field(default_factory=collections.Counter)
    last_error: str = ""

    def __post_init__(self) -> None:
        self.confirmed_id = numpy.zeros(self.size, dtype=numpy.int64)
        self.acked_id = numpy.zeros(self.size, dtype=numpy.int64)
        self.acks = numpy.zeros(self.size, dtype=numpy.uint16)
        self.seen = numpy.zeros(self.size, dtype=numpy.uint16)
        self.most_deliveries = numpy.zeros(self.size, dtype=numpy.uint16)

    def delivered(self, index: int, message: models.Message) -> None:
        self.seen[index] += 1
        self.most_deliveries[index] = max(int(self.most_deliveries[index]), message.deliveries)
        if message.deliveries > 1:
            self.redeliveries[message.failure or ""] += 1

    def acked(self, index: int, message_id: int) -> None:
        if self.acks[index]:
            self.repeated_acks.append((index, int(self.acked_id[index]), message_id))
        else:
            self.acked_id[index] = message_id
        self.acks[index] += 1

    def failed(self, exc: Exception) -> None:
        self.errors[type(exc).__name__] += 1
        self.last_error = f"{type(exc).__name__}: {exc}"


@dataclass(frozen=True, slots=True)
class ProcessReport:
    """What one client process saw (picklable); the parent adds them up."""

    process: str
    ledger: Ledger
    outages: list[Outage]
    producing_s: float  # from the go until its last producer finished


class Tracked:
    """One client whose calls are watched for outages."""

    def __init__(self, client: AsyncClient, name: str, outages: list[Outage]) -> None:
        self.client = client
        self.name = name
        self._outages = outages
        self._server = client.server
        self._since: float | None = None
        self._lost: str | None = None
        self._error = ""
        self._connected: asyncio.Task[float] | None = None

    async def call(self, awaitable: Awaitable[T]) -> T:
        try:
            result = await awaitable
        except OUTAGES as exc:
            if self._since is None:
                self._since, self._lost = time.monotonic(), self._server
                self._error = type(exc).__name__
                self._connected = asyncio.create_task(self._logged_in_again())
            raise
        except errors.CourierError:
            self._answered()  # the server answered: the session works
            raise
        self._answered()
        return result

    async def _logged_in_again(self) -> float:
        """When the client has a connection again: the next call fails over and logs in
        on a survivor before it is sent."""
        while True:
            if self.client.server is not None:
                return time.monotonic()
            await asyncio.sleep(SESSION_POLL_S)

    def _answered(self) -> None:
        server, now = self.client.server, time.monotonic()
        if self._since is not None and self._connected is not None:
            connected = self._connected.result() if self._connected.done() else now
            self._connected.cancel()
            self._outages.append(Outage(self.name, self._lost, self._since, connected, now,
                                        server, self._error))  # fmt: skip
            self._since = self._connected = None
        self._server = server


def process_main(plan: ClientsPlan, control: Connection) -> None:
    """multiprocessing entry point (the ``clientpool.ProcessGroup`` protocol)."""
    loop.child(control, lambda: run_clients(plan, control))


async def run_clients(plan: ClientsPlan, control: Connection) -> ProcessReport:
    """Log every client in, say ready, wait for go, produce and consume, report."""
    ledger, outages = Ledger(plan.messages), list[Outage]()
    async with contextlib.AsyncExitStack() as stack:
        first = [p for p, _ in plan.producers] + [
            plan.producer_count + c for c, _ in plan.consumers
        ]
        names = [name for _, name in (*plan.producers, *plan.consumers)]
        clients = await asyncio.gather(
            *(_connect(plan, name, at, stack) for name, at in zip(names, first, strict=True))
        )
        tracked = [Tracked(c, n, outages) for c, n in zip(clients, names, strict=True)]
        await loop.wait_for_go(control)
        started = time.monotonic()
        progress = asyncio.create_task(_report_progress(plan, ledger))
        producing = asyncio.gather(*(
            produce(plan, ledger, each, number)
            for each, (number, _) in zip(tracked, plan.producers, strict=False)
        ))  # fmt: skip
        consuming = asyncio.gather(
            *(consume(plan, ledger, each) for each in tracked[len(plan.producers) :])
        )
        await producing
        producing_s = time.monotonic() - started
        plan.progress[plan.slot * PROGRESS_FIELDS + 2] = 1
        await consuming
        progress.cancel()
        _publish(plan, ledger)
    return ProcessReport(plan.process, ledger, outages, producing_s)


async def _connect(
    plan: ClientsPlan, name: str, first: int, stack: contextlib.AsyncExitStack
) -> AsyncClient:
    """Log in, trying the middleware from the ``first``-th on (round-robin over clients)."""
    first %= len(plan.servers)
    servers = plan.servers[first:] + plan.servers[:first]
    opening = AsyncClient.connect(
        ",".join(servers), name=name, request_timeout=REQUEST_TIMEOUT_S,
        failover_timeout=FAILOVER_TIMEOUT_S,
    )  # fmt: skip
    return await stack.enter_async_context(opening)


async def _report_progress(plan: ClientsPlan, ledger: Ledger) -> None:
    while True:
        _publish(plan, ledger)
        await asyncio.sleep(PROGRESS_EVERY_S)


def _publish(plan: ClientsPlan, ledger: Ledger) -> None:
    base = plan.slot * PROGRESS_FIELDS
    plan.progress[base] = ledger.sends - len(ledger.unconfirmed)
    plan.progress[base + 1] = int(numpy.count_nonzero(ledger.acks))


async def produce(plan: ClientsPlan, ledger: Ledger, me: Tracked, producer: int) -> None:
    """``plan.window`` lanes, each sending the next number not yet taken."""
    numbers = iter(range(counts(plan.messages, plan.producer_count)[producer]))
    first = offsets(plan.messages, plan.producer_count)[producer]
    lanes = (_send_lane(plan, ledger, me, producer, first, numbers) for _ in range(plan.window))
    await asyncio.gather(*lanes)


async def _send_lane(
    plan: ClientsPlan,
    ledger: Ledger,
    me: Tracked,
    producer: int,
    first: int,
    numbers: Iterator[int],
) -> None:
    for n in numbers:
        ledger.sends += 1
        ids = await _send_until_confirmed(plan, ledger, me, producer, n)
        if ids:
            ledger.confirmed_id[first + n] = ids[0]
        else:
            ledger.unconfirmed.append(first + n)


async def _send_until_confirmed(
    plan: ClientsPlan, ledger: Ledger, me: Tracked, producer: int, n: int
) -> list[int] | None:
    message, dedup_id = body(producer, n, plan.message_size), f"{producer}-{n}"
    deadline = time.monotonic() + plan.give_up_s
    while True:
        try:
            return await me.call(me.client.send(plan.queue_id, message, dedup_id=dedup_id))
        except OUTAGES as exc:
            ledger.failed(exc)
            if time.monotonic() > deadline:
                return None
        except errors.CourierError as exc:
            ledger.failed(exc)
            return None
        ledger.retried_sends += 1
        await asyncio.sleep(RETRY_PAUSE_S)


async def consume(plan: ClientsPlan, ledger: Ledger, me: Tracked) -> None:
    """``plan.window`` lanes, each receiving, processing and acking one message at a time."""
    await asyncio.gather(*(_consume_lane(plan, ledger, me) for _ in range(plan.window)))


async def _consume_lane(plan: ClientsPlan, ledger: Ledger, me: Tracked) -> None:
    offset = offsets(plan.messages, plan.producer_count)
    while not plan.stop.is_set():
        try:
            message = await me.call(
                me.client.receive(plan.queue_id, timeout=RECEIVE_WAIT_S, lease=plan.lease_s)
            )
        except errors.CourierError as exc:
            ledger.failed(exc)
            await asyncio.sleep(RETRY_PAUSE_S)
            continue
        if message is None:
            continue
        producer, n = number(message)
        index = offset[producer] + n
        ledger.delivered(index, message)
        if plan.process_s:
            await asyncio.sleep(plan.process_s)
        await _ack(plan, ledger, me, message, index)


async def _ack(
    plan: ClientsPlan, ledger: Ledger, me: Tracked, message: models.Message, index: int
) -> None:
    """Ack until the server answers; note what the answer means."""
    lost_attempts = 0
    deadline = time.monotonic() + plan.give_up_s
    while True:
        try:
            await me.call(me.client.ack(message))
        except errors.LeaseExpired:
            if lost_attempts:
                ledger.ack_unknown[index] = lost_attempts
            else:
                ledger.lease_expired_acks += 1
            return
        except errors.CourierError as exc:
            ledger.failed(exc)
            if not isinstance(exc, OUTAGES) or time.monotonic() > deadline:
                ledger.ack_unknown[index] = lost_attempts + 1
                return
            lost_attempts += 1
            await asyncio.sleep(RETRY_PAUSE_S)
            continue
        ledger.acked(index, message.id)
        return


def plans_for(
    processes: int, producer_names: Sequence[str], consumer_names: Sequence[str], **shared: Any
) -> list[ClientsPlan]:
    """Producers and consumers dealt round-robin over the processes."""
    return [
        ClientsPlan(
            process=f"chaos-clients-{slot}",
            slot=slot,
            producers=tuple(
                (p, name) for p, name in enumerate(producer_names) if p % processes == slot
            ),
            consumers=tuple(
                (c, name) for c, name in enumerate(consumer_names) if c % processes == slot
            ),
            **shared,
        )
        for slot in range(processes)
    ]
