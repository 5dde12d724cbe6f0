"""Waiting for messages without polling: RECEIVE and AWAIT_RESPONSE sleep here.

A waiter registers for one queue *before* it tries the pop, so a message that lands
between a miss and the wait still wakes it. The database announces what every
statement stored on the ``courier_messages`` channel (payload
``<queue_id>:<receiver>:<count>``, the receiver empty for broadcast messages);
``courier.db.listen.NotificationListener`` feeds those announcements to
``Waiters.notify_payload``.

A message wakes only as many waiters as it can satisfy: ``count`` of those that
want it, oldest first. A woken waiter that then takes nothing (another reader was
quicker, it reads by sender and the message is from someone else, or its selector
does not match the message) or leaves
without trying (cancelled, timed out) hands its wake-up on to the next waiter that
was already waiting when the queue's latest message was announced (not only its
own: another woken waiter may have taken that one, leaving a later message behind),
so a message is never left waiting for a reader that sleeps on; the hand-on ends
once every such waiter has tried. When
the LISTEN connection drops and comes back, every waiter re-checks.

The database announces only what is stored in the queues a middleware watches
(migration 0034): announcing every statement made the commits of all middleware
take turns. A wait's first try needs no watch; after a miss, the try it sleeps on
comes after its queue's watch is in place (``watch_queues``). A watch lasts
WATCH_SECONDS and serves every wait on its queue until WATCH_RENEW_AFTER; no wait
sleeps past it, but wakes, renews it and tries again. While no watch can be made
(sends kept it waiting too long, or the call failed), a wait polls every
POLL_SECONDS instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from courier import errors

log = logging.getLogger(__name__)

T = TypeVar("T")

WATCH_SECONDS = 60.0
"""How long the database announces a queue's messages after a watch."""
WATCH_RENEW_AFTER = 45.0
"""Seconds after a watch began that waiters renew it: the database renews a watch
with ten seconds or more to run without waiting for anything."""
POLL_SECONDS = 0.2
"""How long a wait sleeps, when its queue's watch could not be made, before it tries
again."""
MAX_REMEMBERED_WATCHES = 4096
"""Beyond this many, the watches that ran out are forgotten."""

Watch = Callable[[int, float], Awaitable[bool]]
"""Watch queue ``id`` for ``seconds``; False if that could not be done in time
(``Backend.watch_queue``)."""


@dataclass(eq=False, slots=True)
class Waiter:
    queue_id: int
    reader_id: int
    order: int  # when it began to wait: lower is older
    woken: asyncio.Event = field(default_factory=asyncio.Event)

    def wants(self, receiver: int | None) -> bool:
        """A message addressed to someone else cannot satisfy this waiter."""
        return receiver is None or receiver == self.reader_id


class Waiters:
    """Waiters by queue, oldest first; wakes those new messages can satisfy."""

    def __init__(self) -> None:
        self._by_queue: dict[int, dict[Waiter, None]] = {}
        # queue -> the order bound of its latest announcement; kept while it has
        # waiters, and only waiters older than it may take a handed-on wake-up (one
        # that began to wait since has tried already)
        self._announced: dict[int, int] = {}
        self._order = itertools.count()
        self._stopping = False
        self._watch: Watch | None = None
        self._watched: dict[int, float] = {}  # queue -> loop time its watch needs renewing
        self._watching: dict[int, asyncio.Task[float]] = {}  # watches being made
        self._forgettings = 0  # times every watch was forgotten (wake_all)
        self._remember_at_most = MAX_REMEMBERED_WATCHES

    def watch_queues(self, watch: Watch) -> None:
        """Watch every queue before the last try of a wait on it. Without it (the mock
        tier, or a database that announces everything) waits sleep unbounded."""
        self._watch = watch

    def __len__(self) -> int:
        return sum(len(waiters) for waiters in self._by_queue.values())

    def subscribe(self, queue_id: int, reader_id: int) -> Waiter:
        waiter = Waiter(queue_id, reader_id, next(self._order))
        if self._stopping:
            waiter.woken.set()
        self._by_queue.setdefault(queue_id, {})[waiter] = None
        return waiter

    def unsubscribe(self, waiter: Waiter) -> None:
        waiters = self._by_queue.get(waiter.queue_id)
        if waiters is not None:
            waiters.pop(waiter, None)
            if not waiters:
                del self._by_queue[waiter.queue_id]
                self._announced.pop(waiter.queue_id, None)

    def notify(
        self,
        queue_id: int,
        receiver: int | None,
        count: int | None = None,
        *,
        below: int | None = None,
    ) -> int:
        """Wake up to ``count`` (None: every) waiters of the queue that want a message
        for ``receiver``, oldest first, among those older than ``below``; returns how
        many. Waiters already woken will try anyway and are passed over."""
        if below is None:  # an announcement, not a hand-on
            below = next(self._order)
            if queue_id in self._by_queue:
                self._announced[queue_id] = below
        woken = 0
        for waiter in self._by_queue.get(queue_id, {}):
            if count is not None and woken >= count:
                break
            if waiter.order < below and not waiter.woken.is_set() and waiter.wants(receiver):
                waiter.woken.set()
                woken += 1
        return woken

    def hand_on(self, waiter: Waiter | None) -> None:
        """``waiter`` was woken but took nothing: the wake-up goes to the next one that
        was waiting when the queue's latest message was announced."""
        if waiter is not None and waiter.woken.is_set():
            below = self._announced.get(waiter.queue_id, 0)
            self.notify(waiter.queue_id, None, 1, below=below)

    def notify_payload(self, payload: str) -> None:
        """Handle one ``courier_messages`` payload; malformed ones wake nobody."""
        parts = payload.split(":")
        try:
            queue_id = int(parts[0])
            receiver = int(parts[1]) if len(parts) > 1 and parts[1] else None
            count = int(parts[2]) if len(parts) > 2 else None  # older payloads: everyone
        except ValueError:
            return
        self.notify(queue_id, receiver, count)

    def wake_all(self) -> None:
        """Every waiter re-checks: notifications may have been missed. The watches are
        made again too (the database may have lost them, or the cluster's nodes changed)."""
        self._watched.clear()
        self._forgettings += 1
        for queue_id in list(self._by_queue):
            self.notify(queue_id, None)

    def stop(self) -> None:
        """Shutting down: waits end now, after one last try."""
        self._stopping = True
        self.wake_all()

    async def wait_for(
        self,
        queue_id: int,
        reader_id: int,
        attempt: Callable[[], Awaitable[T]],
        timeout: float,
    ) -> T:
        """``attempt()`` until it stops raising NoMessage or the timeout passes.

        On timeout the last NoMessage (e.g. QueueEmpty) propagates.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        answering: Waiter | None = None  # the woken waiter whose wake-up this attempt answers
        while True:
            waiter = self.subscribe(queue_id, reader_id)
            leaving = True
            try:
                covered_until = self._covered_until(queue_id)
                try:
                    return await attempt()
                except BaseException as exc:
                    self.hand_on(answering)  # what woke us was not for us
                    remaining = deadline - loop.time()
                    if not isinstance(exc, errors.NoMessage) or remaining <= 0 or self._stopping:
                        raise
                if covered_until > loop.time():
                    await _wait_event(waiter.woken, min(remaining, covered_until - loop.time()))
                elif await self._watched_until(queue_id) <= loop.time():
                    await _wait_event(waiter.woken, min(remaining, POLL_SECONDS))
                # else the miss came before the watch began: try again at once
                leaving = False
            finally:
                self.unsubscribe(waiter)
                if leaving:
                    self.hand_on(waiter)  # woken meanwhile, and gone without trying for it
            answering = waiter if waiter.woken.is_set() else None

    def _covered_until(self, queue_id: int) -> float:
        """The loop time until which what is stored in the queue is announced: 0.0
        when its watch needs making or renewing (infinity without watches)."""
        if self._watch is None:
            return math.inf
        until = self._watched.get(queue_id, 0.0)
        return until if asyncio.get_running_loop().time() < until else 0.0

    async def _watched_until(self, queue_id: int) -> float:
        """Watch the queue (concurrent waits of one queue share one call); the loop time
        until which the watch serves, 0.0 if it could not be made."""
        assert self._watch is not None
        making = self._watching.get(queue_id)
        if making is None:
            making = asyncio.get_running_loop().create_task(self._make_watch(queue_id, self._watch))
            making.add_done_callback(_seen)  # its waiters may all have left
            self._watching[queue_id] = making
        return await asyncio.shield(making)

    async def _make_watch(self, queue_id: int, watch: Watch) -> float:
        loop = asyncio.get_running_loop()
        began, forgettings = loop.time(), self._forgettings
        try:
            watched = await watch(queue_id, WATCH_SECONDS)
        except errors.CourierError as exc:  # the tries will tell the client, if it matters
            log.debug("cannot watch queue %d: %s", queue_id, exc)
            watched = False
        finally:
            del self._watching[queue_id]
        if not watched:
            return 0.0
        until = began + WATCH_RENEW_AFTER
        if forgettings == self._forgettings:  # not made before everything was forgotten
            self._remember(queue_id, until, loop.time())
        return until

    def _remember(self, queue_id: int, until: float, now: float) -> None:
        if len(self._watched) >= self._remember_at_most:
            self._watched = {q: t for q, t in self._watched.items() if t > now}
            self._remember_at_most = max(MAX_REMEMBERED_WATCHES, 2 * len(self._watched))
        self._watched[queue_id] = until


def _seen(task: asyncio.Task[float]) -> None:
    if not task.cancelled():
        task.exception()


async def _wait_event(event: asyncio.Event, timeout: float) -> None:
    # Not asyncio.wait_for: on Python 3.11 it swallows a cancellation that arrives just
    # as the event is set, and a cancelled receive would then go on to pop.
    with contextlib.suppress(TimeoutError):  # the caller makes its final attempt
        async with asyncio.timeout(timeout):
            await event.wait()
