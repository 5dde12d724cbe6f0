"""The rate sampler on its own, fed by a counting fake (the real counters are tested
against PostgreSQL in test_console_api.py)."""

from __future__ import annotations

import asyncio

import pytest

from courier.console import rates


class FakeCounters:
    """Cumulative counters that grow by a fixed step per read, and count the reads."""

    def __init__(self, inserted_step: int, deleted_step: int) -> None:
        self.reads = 0
        self.inserted = 0
        self.deleted = 0
        self.steps = (inserted_step, deleted_step)

    async def __call__(self) -> tuple[int, int]:
        self.reads += 1
        self.inserted += self.steps[0]
        self.deleted += self.steps[1]
        return self.inserted, self.deleted


def test_rate_between_divides_by_elapsed_time() -> None:
    earlier = rates.Sample(at=100.0, inserted=10, deleted=4)
    later = rates.Sample(at=102.0, inserted=30, deleted=10)
    point = rates.rate_between(earlier, later)
    assert (point.at, point.sent, point.popped) == (102.0, 10.0, 3.0)


def test_a_counter_reset_counts_as_zero_not_negative() -> None:
    earlier = rates.Sample(at=0.0, inserted=500, deleted=500)
    later = rates.Sample(at=1.0, inserted=3, deleted=2)
    point = rates.rate_between(earlier, later)
    assert (point.sent, point.popped) == (0.0, 0.0)


def test_intervals_below_one_second_are_raised_to_one() -> None:
    sampler = rates.RateSampler(FakeCounters(1, 1), interval_s=0.01, window_s=60)
    assert sampler.interval_s == 1.0


async def test_the_ring_buffer_keeps_only_the_window() -> None:
    counters = FakeCounters(7, 3)
    sampler = rates.RateSampler(counters, interval_s=1.0, window_s=5)
    for _ in range(20):
        await sampler.sample_once()
    result = sampler.rates()
    assert len(result.points) == 5  # 6 samples kept, 5 intervals between them
    assert result.sent_in_window == 5 * 7
    assert result.popped_in_window == 5 * 3


@pytest.mark.slow
async def test_viewers_never_cause_extra_database_reads() -> None:
    counters = FakeCounters(1, 0)
    sampler = rates.RateSampler(counters, interval_s=1.0, window_s=60)
    async with rates.running(sampler):
        for _ in range(25):  # 25 viewers polling every 0.1 s for 2.5 s
            await asyncio.gather(*(asyncio.to_thread(sampler.rates) for _ in range(25)))
            await asyncio.sleep(0.1)
    assert 2 <= counters.reads <= 4
