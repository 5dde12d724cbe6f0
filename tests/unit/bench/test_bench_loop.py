"""The closed loop's bookkeeping, with a fake system whose requests take known times."""

from __future__ import annotations

import asyncio
import time

import numpy

from courier.bench import loop

MS = 1_000_000


class FakePeer:
    """Sends take 2 ms, pops 1 ms; every third pop finds nothing; one send fails."""

    def __init__(self, fail_on_send: int = -1) -> None:
        self.sends = 0
        self.pops = 0
        self.fail_on_send = fail_on_send
        self.finished: list[int] = []  # perf_counter_ns at the end of each request
        self.sends_started: list[int] = []

    async def send(self) -> int:
        self.sends += 1
        self.sends_started.append(time.perf_counter_ns())
        await asyncio.sleep(0.002)
        if self.sends == self.fail_on_send:
            raise ConnectionResetError("gone")
        self.finished.append(time.perf_counter_ns())
        return 1

    async def pop(self) -> int:
        self.pops += 1
        await asyncio.sleep(0.001)
        self.finished.append(time.perf_counter_ns())
        return int(self.pops % 3 != 0)


def window(warmup_ms: int, measured_ms: int) -> loop.Window:
    start = time.perf_counter_ns() + 5 * MS
    return loop.Window(start, start + warmup_ms * MS, start + (warmup_ms + measured_ms) * MS)


async def test_only_requests_that_end_inside_the_window_count() -> None:
    peer, tally, measured = FakePeer(), loop.Tally(), window(warmup_ms=60, measured_ms=120)
    await loop.drive(peer, measured, tally)
    inside = [instant for instant in peer.finished if measured.measures(instant)]
    assert len(tally.send_ns) + len(tally.pop_ns) == len(inside)
    assert 0 < len(inside) < len(peer.finished)  # the warm-up's requests are left out
    assert min(tally.send_ns) >= 2 * MS and min(tally.pop_ns) >= 1 * MS
    # It stops starting iterations at the end: only the one in flight runs over.
    # (Start times, not end times: a loaded machine may wake a sleeper late.)
    assert max(peer.sends_started) < measured.until_ns


async def test_empty_pops_and_failures_are_counted_and_the_loop_goes_on() -> None:
    peer, tally = FakePeer(fail_on_send=3), loop.Tally()
    await loop.drive(peer, window(warmup_ms=0, measured_ms=100), tally)
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
