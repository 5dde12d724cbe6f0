"""The closed loop's bookkeeping, with a fake system whose requests take known times.

The fake runs on a virtual clock (perf_counter_ns is patched to read it),
so what is counted does not depend on how loaded the machine is."""

from __future__ import annotations

import asyncio
import time

import numpy
import pytest

from courier.bench import loop

MS = 1_000_000


class VirtualClock:
    def __init__(self) -> None:
        self.now_ns = time.perf_counter_ns()

    def __call__(self) -> int:
        return self.now_ns


class FakePeer:
    """Sends take 2 ms, pops 1 ms; every third pop finds nothing; one send fails."""

    def __init__(self, clock: VirtualClock, fail_on_send: int = -1) -> None:
        self.clock = clock
        self.sends = 0
        self.pops = 0
        self.fail_on_send = fail_on_send
        self.finished: list[int] = []  # the clock at the end of each request
        self.sends_started: list[int] = []

    async def send(self) -> int:
        self.sends += 1
        self.sends_started.append(self.clock.now_ns)
        await self._take(2 * MS)
        if self.sends == self.fail_on_send:
            raise ConnectionResetError("gone")
        self.finished.append(self.clock.now_ns)
        return 1

    async def pop(self) -> int:
        self.pops += 1
        await self._take(1 * MS)
        self.finished.append(self.clock.now_ns)
        return int(self.pops % 3 != 0)

    async def _take(self, duration_ns: int) -> None:
        self.clock.now_ns += duration_ns
        await asyncio.sleep(0)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> VirtualClock:
    virtual = VirtualClock()
    monkeypatch.setattr(time, "perf_counter_ns", virtual)
    return virtual


def window(clock: VirtualClock, warmup_ms: int, measured_ms: int) -> loop.Window:
    start = clock.now_ns + 5 * MS
    return loop.Window(start, start + warmup_ms * MS, start + (warmup_ms + measured_ms) * MS)


async def test_only_requests_that_end_inside_the_window_count(clock: VirtualClock) -> None:
    peer, tally = FakePeer(clock), loop.Tally()
    measured = window(clock, warmup_ms=60, measured_ms=120)
    clock.now_ns = measured.start_ns  # the loop's first sleep then takes no time
    await loop.drive(peer, measured, tally)
    inside = [instant for instant in peer.finished if measured.measures(instant)]
    assert len(tally.send_ns) + len(tally.pop_ns) == len(inside) == 80  # 40 rounds of 3 ms
    assert 0 < len(inside) < len(peer.finished)  # the warm-up's requests are left out
    assert set(tally.send_ns) == {2 * MS} and set(tally.pop_ns) == {1 * MS}
    # It stops starting iterations at the end: only the one in flight runs over.
    assert max(peer.sends_started) < measured.until_ns


async def test_empty_pops_and_failures_are_counted_and_the_loop_goes_on(
    clock: VirtualClock,
) -> None:
    peer, tally = FakePeer(clock, fail_on_send=3), loop.Tally()
    measured = window(clock, warmup_ms=0, measured_ms=100)
    clock.now_ns = measured.start_ns
    await loop.drive(peer, measured, tally)
    assert tally.errors == 1
    assert tally.last_error == "ConnectionResetError: gone"
    assert peer.sends > 5  # went on after the failure
    # Pops 3, 6, 9, ... were empty. With no warm-up the counted pops are the first
    # ones (the last may have ended after the window, uncounted).
    assert tally.empty_pops == len(tally.pop_ns) // 3 > 0


def tally(
    send_ns: list[int],
    pop_ns: list[int],
    empty_pops: int = 0,
    errors: int = 0,
    last_error: str = "",
) -> loop.Tally:
    """A tally whose samples all completed in interval 0."""
    found = loop.Tally(empty_pops=empty_pops, errors=errors, last_error=last_error)
    found.send_ns.extend(send_ns)
    found.pop_ns.extend(pop_ns)
    found.send_interval.extend([0] * len(send_ns))
    found.pop_interval.extend([0] * len(pop_ns))
    return found


def test_a_report_joins_every_clients_latencies() -> None:
    first = tally([1, 2], [3], empty_pops=1)
    second = tally([4], [5, 6], errors=2, last_error="Boom: x")
    second.pop_interval[1] = 1
    report = loop.report("p", [first, second])
    assert numpy.array_equal(report.send_ns, [1, 2, 4])
    assert numpy.array_equal(report.pop_ns, [3, 5, 6])
    assert numpy.array_equal(report.pop_interval, [0, 0, 1])  # each tag stays with its sample
    assert (report.empty_pops, report.errors, report.last_error) == (1, 2, "Boom: x")


def test_a_report_of_clients_that_measured_nothing_is_empty() -> None:
    report = loop.report("p", [loop.Tally(), loop.Tally()])
    assert report.send_ns.size == report.pop_ns.size == report.send_interval.size == 0
    assert report.send_ns.dtype == numpy.int64 and report.send_interval.dtype == numpy.int32
