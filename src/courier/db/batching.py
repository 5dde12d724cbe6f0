"""Natural batching: requests that arrive together share one database call.

The first request goes out at once. Those that arrive while calls are in flight
wait, and the next free call takes all of them (up to a cap) as one batch. An idle
system therefore adds no latency and needs no timers, and a busy one makes fewer,
larger calls, each with one round trip and one commit.

``BatchedRepository`` is the repository with sends, reads (pops, leased or not, and
peeks), acks, creating and deleting queues and listing a reader's queues going
through one batcher; every other operation is one call as before. Handlers cannot
tell the difference: each request still gets its own answer or its own typed error.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import asyncpg

from courier import config, errors, models, selectors
from courier.db import _translate, repository

log = logging.getLogger(__name__)

R = TypeVar("R")
T = TypeVar("T")

Timing = repository.Timing

MAX_BATCH = 256
"""Requests one call takes at most; a larger backlog is split."""

MAX_IN_FLIGHT = 1
"""Calls one batcher keeps running at once: a new batch forms while they run. On
the development box one gave larger batches and more throughput than two. With one,
the batcher of single requests can keep its connection between calls."""

BULK_IN_FLIGHT = 2
"""The same for the batcher of batch requests (SEND_MANY, RECEIVE_MANY, ACK_MANY):
each already carries many messages, and a second call in flight lets one call's
commit overlap the next one's work (10-15% more messages per second on the
development box)."""

GATHER_TURNS = 2
"""Turns of the event loop a batcher lets pass between two batches (see
``_let_arrivals_in``); more gave no larger batches on the development box."""

SUBTRANSACTIONS_PER_CALL = 60
"""Requests one call takes at most that run in a subtransaction of their own (sends
with options, reads other than plain pops, batch requests, creates and deletes of
queues). PostgreSQL keeps 64 subtransaction ids per backend in shared memory; past
that it marks the transaction overflowed, and every other backend's visibility
checks then look subtransactions up on disk until it ends."""

RunBatch = Callable[[list[R]], Awaitable[repository.BatchOutcome[T]]]
Cost = Callable[[R], int]


@dataclass(slots=True)
class _Pending(Generic[R, T]):
    request: R
    future: asyncio.Future[T]
    timing: Timing | None
    queued_ns: int


class Batcher(Generic[R, T]):
    """Runs requests in batches through ``run``, which answers each one.

    When a whole batch fails for a reason other than an outage, each of its requests
    runs again alone, so one request the database rejects never fails the others.
    """

    def __init__(
        self,
        run: RunBatch[R, T],
        *,
        max_batch: int = MAX_BATCH,
        max_in_flight: int = MAX_IN_FLIGHT,
        cost: Cost[R] | None = None,
        max_cost: int = SUBTRANSACTIONS_PER_CALL,
    ) -> None:
        self._run = run
        self._max_batch = max_batch
        self._max_in_flight = max_in_flight
        self._cost = cost
        self._max_cost = max_cost
        self._pending: list[_Pending[R, T]] = []
        self._in_flight = 0
        self._draining: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop of the first submit
        self.on_batch: Callable[[int], None] | None = None
        """Told the size of every database call made (the metrics' batch sizes)."""

    async def submit(self, request: R, timing: Timing | None = None) -> T:
        loop = self._loop or self._bind_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._pending.append(_Pending(request, future, timing, time.perf_counter_ns()))
        if self._in_flight < self._max_in_flight:
            self._in_flight += 1
            drain = loop.create_task(self._drain())
            self._draining.add(drain)  # the loop keeps only a weak reference to a task
            drain.add_done_callback(self._draining.discard)
        return await future

    def _bind_loop(self) -> asyncio.AbstractEventLoop:
        # Asked once, not per request: on Python 3.11 each asking is a getpid().
        self._loop = asyncio.get_running_loop()
        return self._loop

    async def _drain(self) -> None:
        try:
            while self._pending:
                # A caller that gave up (cancelled) must not have a message popped for it.
                self._pending = [pending for pending in self._pending if not pending.future.done()]
                batch = self._take()
                if batch:
                    await self._answer_safely(batch)
                    await _let_arrivals_in()
        finally:
            self._in_flight -= 1

    def _take(self) -> list[_Pending[R, T]]:
        """The next batch, removed from the waiting list: at most ``max_batch``
        requests, and (with a cost) at most ``max_cost`` in all, but never none."""
        size = min(len(self._pending), self._max_batch)
        if self._cost is not None:
            spent = 0
            for taken, pending in enumerate(self._pending[:size]):
                spent += self._cost(pending.request)
                if spent > self._max_cost and taken > 0:
                    size = taken
                    break
        batch = self._pending[:size]
        del self._pending[:size]
        return batch

    async def _answer_safely(self, batch: list[_Pending[R, T]]) -> None:
        """Answer the batch; whatever goes wrong, no caller is left waiting."""
        try:
            await self._answer(batch)
        except Exception:
            log.exception("answering a batch of %d failed", len(batch))
            for pending in batch:
                _settle(pending.future, errors.InternalError())

    async def _answer(self, batch: list[_Pending[R, T]]) -> None:
        if self.on_batch is not None:
            self.on_batch(len(batch))
        started = time.perf_counter_ns()
        try:
            outcome = await self._run([pending.request for pending in batch])
        except Exception as exc:
            if len(batch) > 1 and not _translate.is_outage(exc):
                _log_refused(exc, len(batch))
                for pending in batch:
                    await self._answer([pending])
                return
            for pending in batch:
                _settle(pending.future, exc)
            return
        answered = time.perf_counter_ns()
        if len(outcome.answers) != len(batch):  # a bug, never a reason to run it again
            raise errors.InternalError(
                f"a batch of {len(batch)} got {len(outcome.answers)} answers"
            )
        for pending, answer in zip(batch, outcome.answers, strict=True):
            if pending.timing is not None:  # waiting for the batch counts as pool wait
                pending.timing.spans(pending.queued_ns, started, answered, outcome.exec_ns)
            _settle(pending.future, answer)


async def _let_arrivals_in() -> None:
    """Between two batches, give requests that arrived meanwhile the turns of the
    event loop they need to reach the batcher: one for their connection to read them,
    one for their task to start. The next batch comes out larger (15 requests rather
    than 12 at 64 clients on the development box, for a tenth more throughput), and a
    database call costs much the same whatever its size. An idle batcher never gets
    here: a lone request still goes out at once."""
    for _ in range(GATHER_TURNS):
        await asyncio.sleep(0)


def _log_refused(exc: BaseException, size: int) -> None:
    """A request a client got wrong (a NUL byte, a missing queue) is routine; anything
    else means batches are failing, and every request paying for a second call,
    which an operator must see."""
    routine = isinstance(exc, errors.CourierError) and not isinstance(exc, errors.InternalError)
    level = logging.DEBUG if routine else logging.WARNING
    log.log(level, "a batch of %d was refused whole; running each alone: %s", size, exc)


def _settle(future: asyncio.Future[T], answer: T | BaseException) -> None:
    if future.done():  # the caller gave up (cancelled); nobody reads the answer
        return
    if isinstance(answer, BaseException):
        future.set_exception(answer)
    else:
        future.set_result(answer)


class BatchedRepository(repository.Repository):
    """The repository, with sends, reads, acks and queue requests coalesced into
    batched calls.

    Every kind of single request, for every queue, shares one batcher, so the
    requests waiting at one moment cost one round trip and one commit between them.
    Batch requests share a second one, which may keep two calls in flight.
    """

    def __init__(
        self,
        pool: asyncpg.Pool,
        limits: config.Limits = repository.DEFAULT_LIMITS,
        timeouts: config.PoolSettings = repository.DEFAULT_POOL,
    ) -> None:
        super().__init__(pool, limits, timeouts)
        # The batcher of single requests makes one call at a time, so it keeps a
        # connection between its calls; not when that would be the pool's only one.
        keeps = MAX_IN_FLIGHT == 1 and pool.get_max_size() > 1
        self._kept = repository.KeptConnection() if keeps else None
        self._batcher: Batcher[repository.Operation, Any] = Batcher(
            self._run_single_batch, cost=subtransactions
        )
        self._bulk: Batcher[repository.Operation, Any] = Batcher(
            self._run_batch, max_in_flight=BULK_IN_FLIGHT, cost=subtransactions
        )

    def watch_batches(self, observer: Callable[[str], Callable[[int], None]]) -> None:
        """Report every call's size to ``observer(batcher name)``: "single" for the
        batcher of single requests, "bulk" for that of batch requests."""
        self._batcher.on_batch = observer("single")
        self._bulk.on_batch = observer("bulk")

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
        timing: Timing | None = None,
    ) -> list[int]:
        self._check_message(body, priority)
        repository.check_properties(options.properties)
        request = repository.SendRequest(
            sender_id, queue_ids, body, receiver, priority, context, options
        )
        ids: list[int] = await self._batcher.submit(request, timing)
        return ids

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
        timing: Timing | None = None,
    ) -> models.Message:
        if selector is not None:  # selective reads are rarer: one call each
            return await super().read(
                reader_id, queue_id=queue_id, sender_id=sender_id, order=order, pop=pop,
                lease=lease, selector=selector, timing=timing,
            )  # fmt: skip
        request: repository.Operation
        if lease is not None:
            request = repository.ReadRequest(
                reader_id, queue_id, sender_id, order, pop, lease.ms, lease.instance_id
            )
        elif pop and queue_id is not None and sender_id is None:
            request = repository.PopRequest(reader_id, queue_id, order)
        elif queue_id is None and sender_id is None:
            raise errors.BadRequest("a read needs a queue or a sender")
        else:
            request = repository.ReadRequest(reader_id, queue_id, sender_id, order, pop)
        message: models.Message = await self._batcher.submit(request, timing)
        return message

    async def ack(self, holder_id: int, delivery_id: int, *, timing: Timing | None = None) -> None:
        await self._batcher.submit(repository.AckRequest(holder_id, delivery_id), timing)

    async def create_queue(
        self,
        name: str,
        *,
        creator: int | None = None,
        max_queues: int | None = None,
        timing: Timing | None = None,
    ) -> models.Queue:
        request = repository.CreateQueueRequest(name, creator, max_queues)
        queue: models.Queue = await self._submit_queue_request(request, timing)
        return queue

    async def delete_queue(
        self,
        queue_id: int,
        *,
        if_empty: bool = False,
        actor: int | None = None,
        timing: Timing | None = None,
    ) -> None:
        request = repository.DeleteQueueRequest(queue_id, if_empty, actor)
        await self._submit_queue_request(request, timing)

    async def queues_for_me(
        self, reader_id: int, *, timing: Timing | None = None
    ) -> list[models.Queue]:
        request = repository.ListingRequest(reader_id)
        queues: list[models.Queue] = await self._submit_queue_request(request, timing)
        return queues

    async def _submit_queue_request(
        self, request: repository.QueueRequest, timing: Timing | None
    ) -> Any:
        """Through the batcher. One the batch left out (it would have waited for a lock,
        or it deletes a long queue) runs alone in the caller's task, as before batching:
        only its own caller waits for it."""
        answer = await self._batcher.submit(request, timing)
        if answer is repository.LEFT_OUT:
            return await self._queue_request_alone(request, timing)
        return answer

    async def send_many(
        self,
        sender_id: int,
        queue_ids: Sequence[int],
        drafts: Sequence[models.Draft],
        *,
        timing: Timing | None = None,
    ) -> list[list[int]]:
        self._check_drafts(drafts)
        request = repository.SendManyRequest(sender_id, queue_ids, drafts)
        ids: list[list[int]] = await self._bulk.submit(request, timing)
        return ids

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
        timing: Timing | None = None,
    ) -> list[models.Message]:
        if selector is not None:
            return await super().pop_many(
                reader_id, queue_id, count, sender_id=sender_id, order=order, lease=lease,
                selector=selector, timing=timing,
            )  # fmt: skip
        request = repository.PopManyRequest(
            reader_id, queue_id, count, sender_id, order,
            lease.ms if lease else 0, lease.instance_id if lease else None,
        )  # fmt: skip
        messages: list[models.Message] = await self._bulk.submit(request, timing)
        return messages

    async def ack_many(
        self, holder_id: int, delivery_ids: Sequence[int], *, timing: Timing | None = None
    ) -> list[models.Settled]:
        request = repository.AckManyRequest(holder_id, tuple(delivery_ids))
        settled: list[models.Settled] = await self._bulk.submit(request, timing)
        return settled

    async def close(self) -> None:
        if self._kept is not None:
            self._kept.closed = True  # a call still running hands its connection back
        try:
            await self.release_connection()
        finally:
            await super().close()

    async def release_connection(self) -> None:
        """Hand the connection the batcher keeps back to the pool (it takes one again
        on its next call): for whoever closes the pool without closing this, since
        a pool waits for every connection it lent before it closes."""
        if self._kept is None:
            return
        connection, self._kept.connection = self._kept.connection, None
        if connection is not None:
            await self.pool.release(connection)

    async def _run_single_batch(
        self, operations: list[repository.Operation]
    ) -> repository.BatchOutcome[Any]:
        if self._kept is not None:
            self._keep_connection(self._kept)  # for the batcher's drain task alone
        return await self._run_batch(operations)

    async def _run_batch(
        self, operations: list[repository.Operation]
    ) -> repository.BatchOutcome[Any]:
        """A batch of one takes the single-request functions, which are quicker alone."""
        if len(operations) > 1:
            return await self.exchange(operations)
        (operation,) = operations
        timing = Timing()
        answer: Any
        try:
            if isinstance(operation, repository.SendRequest):
                answer = await super().send(
                    operation.sender_id, operation.queue_ids, operation.body,
                    receiver=operation.receiver, priority=operation.priority,
                    context=operation.context, options=operation.options, timing=timing,
                )  # fmt: skip
            elif isinstance(operation, repository.PopRequest):
                answer = await super().read(
                    operation.reader_id, queue_id=operation.queue_id, order=operation.order,
                    pop=True, timing=timing,
                )  # fmt: skip
            elif isinstance(operation, repository.AckRequest):
                await super().ack(operation.holder_id, operation.delivery_id, timing=timing)
                answer = None
            elif isinstance(operation, repository.SendManyRequest):
                answer = await super().send_many(
                    operation.sender_id, operation.queue_ids, operation.drafts, timing=timing
                )
            elif isinstance(operation, repository.PopManyRequest):
                answer = await super().pop_many(
                    operation.reader_id, operation.queue_id, operation.count,
                    sender_id=operation.sender_id, order=operation.order,
                    lease=_lease(operation), timing=timing,
                )  # fmt: skip
            elif isinstance(operation, repository.AckManyRequest):
                answer = await super().ack_many(
                    operation.holder_id, operation.delivery_ids, timing=timing
                )
            elif isinstance(operation, repository.QueueRequest):
                # Alone it gains nothing here, and a create or delete may wait for a
                # lock: its caller runs it, so the batcher is never held up.
                answer = repository.LEFT_OUT
            else:
                answer = await super().read(
                    operation.reader_id, queue_id=operation.queue_id,
                    sender_id=operation.sender_id, order=operation.order, pop=operation.pop,
                    lease=_lease(operation), timing=timing,
                )  # fmt: skip
        except errors.CourierError as exc:
            if isinstance(exc, errors.Unavailable):
                raise
            answer = exc
        return repository.BatchOutcome([answer], timing.exec_ns)

    async def _queue_request_alone(
        self, operation: repository.QueueRequest, timing: Timing | None
    ) -> models.Queue | list[models.Queue] | None:
        """Its own call of the plain repository, in the caller's task."""
        if isinstance(operation, repository.CreateQueueRequest):
            return await super().create_queue(
                operation.name, creator=operation.creator, max_queues=operation.max_queues,
                timing=timing,
            )  # fmt: skip
        if isinstance(operation, repository.DeleteQueueRequest):
            await super().delete_queue(
                operation.queue_id, if_empty=operation.if_empty, actor=operation.actor,
                timing=timing,
            )  # fmt: skip
            return None
        return await super().queues_for_me(operation.reader_id, timing=timing)


_WITHOUT_SUBTRANSACTION = repository.PopRequest | repository.AckRequest | repository.ListingRequest


def subtransactions(operation: repository.Operation) -> int:
    """Subtransactions the operation takes in a batched call: none for the plain sends,
    pops and acks the call handles set-based, nor for a listing (it cannot fail),
    one for any other."""
    if isinstance(operation, repository.SendRequest):
        return 0 if operation.options.plain else 1
    return 0 if isinstance(operation, _WITHOUT_SUBTRANSACTION) else 1


def _lease(read: repository.ReadRequest | repository.PopManyRequest) -> repository.Lease | None:
    if not read.lease_ms or read.instance_id is None:
        return None
    return repository.Lease(read.lease_ms, read.instance_id)
