"""Waiting for messages without polling: RECEIVE and AWAIT_RESPONSE sleep here.

A waiter registers for one queue *before* it tries the pop, so a message that lands
between a miss and the wait still wakes it. The database announces every stored
message on the ``courier_messages`` channel (payload ``<queue_id>:<receiver>``, the
receiver empty for broadcast messages); ``courier.db.listen.NotificationListener``
feeds those announcements to ``Waiters.notify_payload``. A woken waiter simply
tries the pop again, so a spurious wake-up costs one query and a missed one cannot
happen while the LISTEN connection is up; when it drops and comes back, every
waiter re-checks.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from courier import errors

T = TypeVar("T")


@dataclass(eq=False, slots=True)
class Waiter:
    queue_id: int
    reader_id: int
    woken: asyncio.Event = field(default_factory=asyncio.Event)

    def wants(self, receiver: int | None) -> bool:
        """A message addressed to someone else cannot satisfy this waiter."""
        return receiver is None or receiver == self.reader_id


class Waiters:
    """Waiters by queue; wakes those a new message might satisfy."""

    def __init__(self) -> None:
        self._by_queue: dict[int, set[Waiter]] = {}
        self._stopping = False

    def __len__(self) -> int:
        return sum(len(waiters) for waiters in self._by_queue.values())

    def subscribe(self, queue_id: int, reader_id: int) -> Waiter:
        waiter = Waiter(queue_id, reader_id)
        if self._stopping:
            waiter.woken.set()
        self._by_queue.setdefault(queue_id, set()).add(waiter)
        return waiter

    def unsubscribe(self, waiter: Waiter) -> None:
        waiters = self._by_queue.get(waiter.queue_id)
        if waiters is not None:
            waiters.discard(waiter)
            if not waiters:
                del self._by_queue[waiter.queue_id]

    def notify(self, queue_id: int, receiver: int | None) -> None:
        for waiter in self._by_queue.get(queue_id, ()):
            if waiter.wants(receiver):
                waiter.woken.set()

    def notify_payload(self, payload: str) -> None:
        """Handle one ``courier_messages`` payload; malformed ones wake nobody."""
        queue_text, _, receiver_text = payload.partition(":")
        try:
            queue_id = int(queue_text)
            receiver = int(receiver_text) if receiver_text else None
        except ValueError:
            return
        self.notify(queue_id, receiver)

    def wake_all(self) -> None:
        """Every waiter re-checks: notifications may have been missed."""
        for waiters in self._by_queue.values():
            for waiter in waiters:
                waiter.woken.set()

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
        while True:
            waiter = self.subscribe(queue_id, reader_id)
            try:
                try:
                    return await attempt()
                except errors.NoMessage:
                    remaining = deadline - loop.time()
                    if remaining <= 0 or self._stopping:
                        raise
                await _wait_event(waiter.woken, remaining)
            finally:
                self.unsubscribe(waiter)


async def _wait_event(event: asyncio.Event, timeout: float) -> None:
    with contextlib.suppress(TimeoutError):  # the caller makes its final attempt
        await asyncio.wait_for(event.wait(), timeout)
