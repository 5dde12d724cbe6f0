"""The waiter table on its own: who a notification wakes, and how a wait ends."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

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
    for payload in ("", "x:1", "7:y", "7:1:z", "7"):
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


async def waiting_on(
    table: waiters.Waiters, *attempts: Callable[[], Awaitable[str]]
) -> list[asyncio.Task[str]]:
    """One waiting task per attempt on queue 7, started in this order (oldest first)."""
    tasks = []
    for attempt in attempts:
        tasks.append(asyncio.create_task(table.wait_for(7, 1, attempt, timeout=10)))
        await asyncio.sleep(0.01)
    return tasks


async def never(counted: list[int]) -> str:
    """A reader the new messages cannot satisfy (say it reads by another sender)."""
    counted.append(1)
    raise errors.QueueEmpty()


async def test_a_notification_wakes_only_as_many_waiters_as_it_stored_messages() -> None:
    table, inbox = waiters.Waiters(), Inbox()
    tasks = await waiting_on(table, *[inbox.pop] * 5)
    assert inbox.attempts == 5
    inbox.items += ["a", "b"]
    table.notify_payload("7::2")
    done, pending = await asyncio.wait(tasks, timeout=0.2)
    assert inbox.attempts == 7  # two woken, not five
    assert sorted(task.result() for task in done) == ["a", "b"]
    assert tasks[:2] == [task for task in tasks if task in done]  # the oldest two
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)


async def test_a_woken_waiter_that_takes_nothing_hands_its_wake_up_on() -> None:
    table, inbox, misses = waiters.Waiters(), Inbox(), []
    choosy, taker = await waiting_on(table, lambda: never(misses), inbox.pop)
    inbox.items.append("for anyone")
    table.notify_payload("7::1")  # wakes the older, choosy one first
    assert await asyncio.wait_for(taker, 1) == "for anyone"
    assert len(misses) == 2  # its first try, and the one its wake-up was spent on
    choosy.cancel()
    await asyncio.gather(choosy, return_exceptions=True)


async def test_the_hand_on_ends_once_every_earlier_waiter_has_tried() -> None:
    table, misses = waiters.Waiters(), []
    tasks = await waiting_on(table, *[lambda: never(misses)] * 4)
    assert len(misses) == 4
    table.notify_payload("7::1")
    await asyncio.sleep(0.2)
    assert len(misses) == 8  # each tried once more, then all sleep again
    assert not any(task.done() for task in tasks)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_waiter_cancelled_after_its_wake_up_hands_it_on() -> None:
    table, inbox = waiters.Waiters(), Inbox()
    leaving, staying = await waiting_on(table, inbox.pop, inbox.pop)
    inbox.items.append("m")
    table.notify_payload("7::1")
    leaving.cancel()  # before it could try for the message it was woken for
    assert await asyncio.wait_for(staying, 1) == "m"
    await asyncio.gather(leaving, return_exceptions=True)


class Mailbox:
    """A stand-in for a queue of (sender, receiver, body) messages."""

    def __init__(self) -> None:
        self.items: list[tuple[str, int | None, str]] = []

    async def pop(self, reader: int, sender: str | None = None) -> str:
        for item in self.items:
            if item[1] in (None, reader) and sender in (None, item[0]):
                self.items.remove(item)
                return item[2]
        raise errors.QueueEmpty()


async def test_a_wake_up_whose_message_another_took_reaches_a_later_waiter() -> None:
    # z and y read reader 1's messages from sender S; w (reader 2) takes anything.
    table, box, gate = waiters.Waiters(), Mailbox(), asyncio.Event()
    gate.set()

    async def slow_z() -> str:
        await gate.wait()
        return await box.pop(1, "S")

    z = asyncio.create_task(table.wait_for(7, 1, slow_z, timeout=10))
    y = asyncio.create_task(table.wait_for(7, 1, lambda: box.pop(1, "S"), timeout=10))
    await asyncio.sleep(0.01)
    gate.clear()  # z's next try hangs until the gate opens
    box.items.append(("S", 1, "m-prime"))
    table.notify_payload("7:1:1")  # wakes z, the oldest
    await asyncio.sleep(0.01)
    w = asyncio.create_task(table.wait_for(7, 2, lambda: box.pop(2), timeout=10))
    await asyncio.sleep(0.01)
    box.items.append(("T", None, "m"))
    table.notify_payload("7::1")  # wakes y, the oldest not woken: it takes m-prime
    assert await asyncio.wait_for(y, 1) == "m-prime"
    gate.set()  # z finds m-prime gone and m not its sender's: it hands the wake-up on
    assert await asyncio.wait_for(w, 1) == "m"
    z.cancel()
    await asyncio.gather(z, return_exceptions=True)


class Watches:
    """A stand-in for ``Backend.watch_queue``: notes each watch; answers ``made``, or
    fails with ``failure``."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, float]] = []
        self.made = True
        self.failure: Exception | None = None
        self.release = asyncio.Event()
        self.release.set()

    async def watch(self, queue_id: int, seconds: float) -> bool:
        self.calls.append((queue_id, seconds))
        await self.release.wait()
        if self.failure is not None:
            raise self.failure
        return self.made


async def test_a_wait_tries_before_it_watches_and_sleeps_on_a_try_after_the_watch() -> None:
    table, inbox, watches = waiters.Waiters(), Inbox(), Watches()
    table.watch_queues(watches.watch)
    watches.release.clear()
    waiting = [asyncio.create_task(table.wait_for(7, n, inbox.pop, timeout=10)) for n in (1, 2)]
    await asyncio.sleep(0.01)
    # Both missed, and wait for the one watch of their queue before trying again.
    assert (watches.calls, inbox.attempts) == ([(7, waiters.WATCH_SECONDS)], 2)
    watches.release.set()
    await asyncio.sleep(0.01)
    assert inbox.attempts == 4
    third = asyncio.create_task(table.wait_for(7, 3, inbox.pop, timeout=10))
    await asyncio.sleep(0.01)
    assert len(watches.calls) == 1 and inbox.attempts == 5  # the watch still serves
    inbox.items += ["a", "b", "c"]
    table.notify_payload("7::3")
    assert sorted(await asyncio.gather(*waiting, third)) == ["a", "b", "c"]


async def test_a_wait_that_finds_a_message_at_once_makes_no_watch() -> None:
    table, inbox, watches = waiters.Waiters(), Inbox(), Watches()
    table.watch_queues(watches.watch)
    inbox.items.append("ready")
    assert await table.wait_for(7, 1, inbox.pop, timeout=10) == "ready"
    assert watches.calls == []


async def test_a_wait_never_sleeps_past_its_watch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(waiters, "WATCH_RENEW_AFTER", 0.05)
    table, inbox, watches = waiters.Waiters(), Inbox(), Watches()
    table.watch_queues(watches.watch)
    waiting = asyncio.create_task(table.wait_for(7, 1, inbox.pop, timeout=10))
    await asyncio.sleep(0.3)
    # No notification came: each time the watch ran out, the wait woke, tried,
    # watched again and tried once more.
    assert len(watches.calls) >= 3 and abs(inbox.attempts - 2 * len(watches.calls)) <= 1
    inbox.items.append("late")
    table.notify_payload("7:")
    assert await asyncio.wait_for(waiting, 1) == "late"


@pytest.mark.parametrize("failure", [None, errors.Unavailable("the database is out of reach")])
async def test_without_a_watch_a_wait_polls_until_one_can_be_made(
    failure: Exception | None,
) -> None:
    table, inbox, watches = waiters.Waiters(), Inbox(), Watches()
    watches.made, watches.failure = False, failure
    table.watch_queues(watches.watch)
    waiting = asyncio.create_task(table.wait_for(7, 1, inbox.pop, timeout=10))
    await asyncio.sleep(2.5 * waiters.POLL_SECONDS)
    assert inbox.attempts >= 3 and len(watches.calls) == inbox.attempts  # no notification
    inbox.items.append("found by polling")
    assert await asyncio.wait_for(waiting, 2 * waiters.POLL_SECONDS) == "found by polling"
    watches.made, watches.failure = True, None
    waiting = asyncio.create_task(table.wait_for(7, 1, inbox.pop, timeout=10))
    await asyncio.sleep(2.5 * waiters.POLL_SECONDS)
    polled = inbox.attempts
    await asyncio.sleep(2.5 * waiters.POLL_SECONDS)
    assert inbox.attempts == polled  # watched now: it sleeps until a notification
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting


async def test_waking_everyone_makes_the_watches_again() -> None:
    table, inbox, watches = waiters.Waiters(), Inbox(), Watches()
    table.watch_queues(watches.watch)
    waiting = asyncio.create_task(table.wait_for(7, 1, inbox.pop, timeout=10))
    await asyncio.sleep(0.01)
    assert (len(watches.calls), inbox.attempts) == (1, 2)
    table.wake_all()  # the LISTEN link came back: the database may have lost them
    await asyncio.sleep(0.01)
    assert [queue for queue, _ in watches.calls] == [7, 7] and inbox.attempts == 4
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
