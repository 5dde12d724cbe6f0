"""The watchdog goes off once, by the earliest deadline it was given, and not after
it is cancelled."""

from __future__ import annotations

import asyncio

import uvloop

from courier import watchdog


async def test_it_goes_off_by_the_earliest_deadline_given() -> None:
    loop = asyncio.get_running_loop()
    went_off: list[float] = []
    dog = watchdog.Watchdog(loop, lambda: went_off.append(loop.time()))
    began = loop.time()
    dog.expect_by(began + 0.5)
    dog.expect_by(began + 5.0)  # later: the earlier one stands
    dog.expect_by(began + 0.1)  # earlier: it moves
    await asyncio.sleep(0.8)
    assert len(went_off) == 1 and 0.1 <= went_off[0] - began < 0.4


async def test_a_cancelled_watchdog_stays_quiet_until_given_a_deadline_again() -> None:
    loop = asyncio.get_running_loop()
    went_off: list[float] = []
    dog = watchdog.Watchdog(loop, lambda: went_off.append(loop.time()))
    dog.expect_by(loop.time() + 0.05)
    assert dog.armed
    dog.cancel()
    assert not dog.armed
    await asyncio.sleep(0.2)
    assert went_off == []
    dog.expect_by(loop.time() + 0.05)
    await asyncio.sleep(0.2)
    assert len(went_off) == 1 and not dog.armed


def test_a_deadline_already_due_can_be_followed_by_another_under_uvloop() -> None:
    """uvloop's call_at returns a plain handle (no ``when``) for a time already, or
    nearly, due: a connection resuming after a long wait sets such a deadline and then
    another as the next chunk arrives."""

    async def run() -> int:
        loop = asyncio.get_running_loop()
        went_off: list[float] = []
        dog = watchdog.Watchdog(loop, lambda: went_off.append(loop.time()))
        dog.expect_by(loop.time() - 1.0)
        dog.expect_by(loop.time() + 5.0)
        dog.expect_by(loop.time() - 0.5)
        await asyncio.sleep(0.1)
        return len(went_off)

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        assert runner.run(run()) == 1
