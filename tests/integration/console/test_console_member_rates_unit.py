"""Member rates on their own: the change of the reported totals between two reads."""

from __future__ import annotations

import pytest

from courier.console import member_rates

MemberRate = member_rates.MemberRate


def sample(at: float, totals: member_rates.Totals) -> member_rates.TotalsSample:
    return member_rates.TotalsSample(at, totals)


def test_a_rate_is_the_change_of_the_totals_over_the_time_between_reads() -> None:
    earlier = sample(10.0, {7: (100, 40), 8: (5, 5)})
    later = sample(14.0, {7: (180, 60), 8: (5, 5)})
    assert member_rates.between(earlier, later) == {
        7: MemberRate(20.0, 5.0),
        8: MemberRate(0.0, 0.0),
    }


def test_a_member_in_one_read_only_has_no_rate_and_totals_going_back_count_zero() -> None:
    earlier = sample(0.0, {7: (500, 500)})
    later = sample(2.0, {7: (10, 600), 9: (50, 0)})
    assert member_rates.between(earlier, later) == {7: MemberRate(0.0, 50.0)}


async def test_the_sampler_rates_the_oldest_against_the_newest_sample_it_keeps() -> None:
    reads = iter([{7: (0, 0)}, {7: (10, 2)}, {7: (30, 6)}])

    async def read() -> member_rates.Totals:
        return next(reads)

    sampler = member_rates.MemberSampler(read, interval_s=1.0)
    assert sampler.rates() == {}
    await sampler.sample_once()
    assert sampler.rates() == {}  # one read: nothing to compare
    await sampler.sample_once()
    await sampler.sample_once()
    [(queue, rate)] = sampler.rates().items()
    assert queue == 7 and rate.produced > 0
    assert rate.consumed == pytest.approx(rate.produced / 5)  # (30 - 0) and (6 - 0)
