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
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from courier import errors

T = TypeVar("T")


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
        """Every waiter re-checks: notifications may have been missed."""
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
                try:
                    return await attempt()
                except BaseException as exc:
                    self.hand_on(answering)  # what woke us was not for us
                    remaining = deadline - loop.time()
                    if not isinstance(exc, errors.NoMessage) or remaining <= 0 or self._stopping:
                        raise
                await _wait_event(waiter.woken, remaining)
                leaving = False
            finally:
                self.unsubscribe(waiter)
                if leaving:
                    self.hand_on(waiter)  # woken meanwhile, and gone without trying for it
            answering = waiter if waiter.woken.is_set() else None


async def _wait_event(event: asyncio.Event, timeout: float) -> None:
    # Not asyncio.wait_for: on Python 3.11 it swallows a cancellation that arrives just
    # as the event is set, and a cancelled receive would then go on to pop.
    with contextlib.suppress(TimeoutError):  # the caller makes its final attempt
        async with asyncio.timeout(timeout):
            await event.wait()
