"""A run cut into intervals: each sample goes to the interval it completed in.

The closed loop runs here on a fake clock, so every instant is known: a send
takes 15 ms and a pop 10 ms, the measured window is 0-100 ms, cut into 40 ms
intervals (0-40, 40-80, and a short 80-100). Worked by hand, the requests complete
at: send 15 (interval 0), pop 25 (0), send 40 (1: a boundary opens its interval),
pop 50 (1), send 65 (1), pop 75 (1), send 90 (2), and pop 100, which is at the end
of the window and not counted.
"""

from __future__ import annotations

import asyncio

import numpy
import pytest

from courier.bench import intervals, loop, results

MS = 1_000_000


class FakeClock:
    """Stands in for the ``time`` module of ``loop``: perf_counter_ns is ours to move."""

    def __init__(self) -> None:
        self.now_ns = 0

    def perf_counter_ns(self) -> int:
        return self.now_ns


class TimedPeer:
    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock

    async def send(self) -> int:
        self.clock.now_ns += 15 * MS
        await asyncio.sleep(0)
        return 1

    async def pop(self) -> int:
        self.clock.now_ns += 10 * MS
        await asyncio.sleep(0)
        return 1


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(loop, "time", fake)
    return fake


async def drive_on_the_fake_clock(clock: FakeClock) -> results.ClientsReport:
    tally = loop.Tally()
    window = loop.Window(0, 0, 100 * MS, interval_ns=40 * MS)
    await loop.drive(TimedPeer(clock), window, tally)
    return loop.report("p", [tally])


async def test_each_sample_is_tagged_with_the_interval_it_completed_in(clock: FakeClock) -> None:
    report = await drive_on_the_fake_clock(clock)
    assert list(report.send_interval) == [0, 1, 1, 2]
    assert list(report.pop_interval) == [0, 1, 1]
    assert list(report.send_ns) == [15 * MS] * 4
    assert list(report.pop_ns) == [10 * MS] * 3


async def test_intervals_count_and_rate_their_own_samples(clock: FakeClock) -> None:
    report = await drive_on_the_fake_clock(clock)
    found = intervals.combine([report], duration_s=0.1, interval_s=0.04)
    assert [(i.start_s, i.end_s) for i in found] == [(0.0, 0.04), (0.04, 0.08), (0.08, 0.1)]
    assert [(i.sends, i.pops) for i in found] == [(1, 1), (2, 2), (1, 0)]
    # 2 requests in 40 ms, 4 in 40 ms, 1 in the last 20 ms.
    assert [i.ops_per_s for i in found] == pytest.approx([50.0, 100.0, 50.0])
    assert found[1].pop_latency == results.Latency(10.0, 10.0, 10.0)
    assert found[2].pop_latency is None


def test_one_interval_when_none_are_asked_for() -> None:
    window = loop.Window(0, 10, 1_000)
    assert {window.interval(instant) for instant in (10, 500, 999)} == {0}


def test_bounds_cover_the_window_and_the_last_may_be_short() -> None:
    assert intervals.bounds(600.0, 60.0)[-1] == (540.0, 600.0)
    assert len(intervals.bounds(600.0, 60.0)) == 10
    assert intervals.bounds(150.0, 60.0) == [(0.0, 60.0), (60.0, 120.0), (120.0, 150.0)]
    assert intervals.bounds(30.0, 60.0) == [(0.0, 30.0)]


def test_processes_are_joined_interval_by_interval() -> None:
    def report(
        send: list[int], send_at: list[int], pop: list[int], pop_at: list[int]
    ) -> results.ClientsReport:
        return results.ClientsReport(
            "p", numpy.array(send, dtype=numpy.int64), numpy.array(pop, dtype=numpy.int64),
            send_interval=numpy.array(send_at, dtype=numpy.int32),
            pop_interval=numpy.array(pop_at, dtype=numpy.int32),
        )  # fmt: skip

    first = report([1 * MS, 2 * MS], [0, 1], [3 * MS], [1])
    second = report([4 * MS], [1], [5 * MS, 6 * MS], [0, 5])  # interval 5: past the end, dropped
    found = intervals.combine([first, second], duration_s=2.0, interval_s=1.0)
    assert [(i.sends, i.pops) for i in found] == [(1, 1), (2, 1)]
    # Interval 1 holds 2, 4 (sends) and 3 (pop) ms: p50 3 ms.
    assert found[1].latency is not None and found[1].latency.p50_ms == 3.0
