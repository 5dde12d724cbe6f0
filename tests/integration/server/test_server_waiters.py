"""The waiter table on its own: who a notification wakes, and how a wait ends."""

from __future__ import annotations

import asyncio
import time

import pytest

from courier import errors
from courier.server import waiters


class Inbox:
    """A stand-in for a queue: the attempt pops from a list, QueueEmpty when empty."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self.attempts = 0

    async def pop(self) -> str:
        self.attempts += 1
        if not self.items:
            raise errors.QueueEmpty()
        return self.items.pop(0)


async def test_notification_for_the_queue_wakes_the_waiter() -> None:
    table, inbox = waiters.Waiters(), Inbox()
    waiting = asyncio.create_task(table.wait_for(7, 1, inbox.pop, timeout=10))
    await asyncio.sleep(0.01)
    assert inbox.attempts == 1 and len(table) == 1
    table.notify_payload("8:")  # another queue
    table.notify_payload("7:2")  # addressed to someone else
    await asyncio.sleep(0.01)
    assert inbox.attempts == 1
    inbox.items.append("hello")
    table.notify_payload("7:1")
    assert await asyncio.wait_for(waiting, 1) == "hello"
    assert len(table) == 0


async def test_malformed_payloads_wake_nobody() -> None:
    table, inbox = waiters.Waiters(), Inbox()
    waiting = asyncio.create_task(table.wait_for(7, 1, inbox.pop, timeout=10))
    await asyncio.sleep(0.01)
    for payload in ("", "x:1", "7:y", "7"):
        table.notify_payload(payload)
    await asyncio.sleep(0.01)
    # "7" alone is a broadcast to queue 7 and does wake; the rest do not.
    assert inbox.attempts == 2
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert len(table) == 0


async def test_timeout_ends_with_the_last_miss_after_a_final_attempt() -> None:
    table, inbox = waiters.Waiters(), Inbox()
    started = time.monotonic()
    with pytest.raises(errors.QueueEmpty):
        await table.wait_for(7, 1, inbox.pop, timeout=0.2)
    assert 0.19 <= time.monotonic() - started < 1
    assert inbox.attempts == 2  # once at the start, once at the deadline


async def test_wake_all_and_stop() -> None:
    table, inbox = waiters.Waiters(), Inbox()
    waiting = asyncio.create_task(table.wait_for(7, 1, inbox.pop, timeout=10))
    await asyncio.sleep(0.01)
    table.wake_all()
    await asyncio.sleep(0.01)
    assert inbox.attempts == 2 and not waiting.done()
    table.stop()
    with pytest.raises(errors.QueueEmpty):
        await asyncio.wait_for(waiting, 1)
    # After stop, waits end at once.
    with pytest.raises(errors.QueueEmpty):
        await asyncio.wait_for(table.wait_for(7, 1, inbox.pop, timeout=10), 1)
