"""What churn, flat and pops conclude from their figures, on hand-made results."""

from __future__ import annotations

import json

import numpy
import pytest

from courier.bench import churn, database, flat, intervals, pops, results


def interval(index: int, operations: int, seconds: float = 10.0) -> intervals.Interval:
    latency = results.Latency(1.0, 2.0, 3.0)
    return intervals.Interval(
        index, index * seconds, (index + 1) * seconds, operations // 2,
        operations - operations // 2, latency, latency, latency,
    )  # fmt: skip


def sample(at_s: float, dead_rows: int) -> database.TableSample:
    return database.TableSample(at_s, live_rows=5, dead_rows=dead_rows, autovacuums=1,
                                total_bytes=8192)  # fmt: skip


def churned(first_ops: int, last_ops: int, dead: list[int]) -> churn.ChurnResult:
    totals = results.combine("courier", 4, 20.0, [])
    samples = [sample(10.0 * n, rows) for n, rows in enumerate(dead)]
    return churn.ChurnResult([interval(0, first_ops), interval(1, last_ops)], samples, totals, {})


def test_churn_compares_the_last_interval_with_the_first() -> None:
    found = churned(10_000, 9_500, [0, 1_200, 700])
    assert found.throughput_ratio == pytest.approx(0.95)
    assert found.verdict() == [
        "last interval's throughput is 95.0% of the first (needs >= 90%): met",
        "dead rows stayed at most 1,200",
    ]
    assert found.sample_after(found.intervals[1]) == sample(20.0, 700)


def test_churn_says_when_throughput_fell_too_far() -> None:
    found = churned(10_000, 8_000, [0, 5])
    assert (
        found.verdict()[0]
        == "last interval's throughput is 80.0% of the first (needs >= 90%): NOT met"
    )
    document = found.as_json(churn.Settings(clients=4, duration_s=20.0, interval_s=10.0))
    assert document["verdict"]["throughput_met"] is False
    assert document["intervals"][1]["table"] is None  # no sample after the last interval
    json.dumps(document, allow_nan=False)


def latency(p50: float) -> results.Latency:
    return results.Latency(p50, p50, p50)


def flat_level(
    background: int, pop_p50: float, send_p50: float, alongside: tuple[float, float] | None
) -> flat.Level:
    """A level; ``alongside`` is the reference's (pop, send) p50 measured in turns with it."""
    return flat.Level(
        background, background, 100, 0.0, 0.0, 0, 0,
        send_latency=latency(send_p50), pop_latency=latency(pop_p50),
        alongside=None if alongside is None else flat.Alongside(
            send_latency=latency(alongside[1]), pop_latency=latency(alongside[0]), empty_pops=0,
        ),
    )  # fmt: skip


def test_flat_puts_each_level_over_the_reference_measured_in_turns_with_it() -> None:
    # The reference alone had a pop p50 of 2.0; in turns with the later levels the box
    # was slower (2.4) and then as fast (2.0): each level is put over its own turns.
    found = flat.FlatResult(
        [
            flat_level(0, 2.0, 1.0, None),
            flat_level(1_000, 2.52, 1.5, (2.4, 1.2)),
            flat_level(10_000, 2.5, 1.0, (2.0, 1.0)),
        ],
        {},
    )
    assert [found.pop_ratio(level) for level in found.levels] == pytest.approx([1.0, 1.05, 1.25])
    assert found.send_ratio(found.levels[1]) == pytest.approx(1.25)
    assert found.verdict() == [
        "pop p50 with 1,000 other messages is 1.050x that with 0, measured in turns"
        " (needs 0.90-1.10): met",
        "pop p50 with 10,000 other messages is 1.250x that with 0, measured in turns"
        " (needs 0.90-1.10): NOT met",
    ]
    document = found.as_json(flat.Settings())
    assert document["levels"][0]["alongside"] is None
    assert document["levels"][1]["alongside"]["pop_latency"]["p50_ms"] == 2.4
    json.dumps(document, allow_nan=False)


def popped(ids: list[int], last_pop_ns: int) -> pops.PoppersReport:
    calls = numpy.full(len(ids), 1_000_000, dtype=numpy.int64)
    return pops.PoppersReport("p", calls, numpy.array(ids, dtype=numpy.int64), 1, last_pop_ns)


def test_pops_count_every_message_and_the_time_to_the_last_pop() -> None:
    level = pops.combine(2, 5, [popped([1, 3, 5], 400_000_000), popped([2, 4], 500_000_000)])
    assert (level.pops, level.distinct, level.calls, level.empty_calls) == (5, 5, 5, 2)
    assert level.seconds == 0.5
    assert level.pops_per_s == 10.0
    assert level.exactly_once


def test_pops_notice_a_message_popped_twice_or_missed() -> None:
    twice = pops.combine(2, 3, [popped([1, 2], 1), popped([2], 1)])
    assert (twice.pops, twice.distinct, twice.exactly_once) == (3, 2, False)
    missed = pops.combine(1, 3, [popped([1, 2], 1)])
    assert not missed.exactly_once


def pops_level(poppers: int, pops_per_s: float) -> pops.Level:
    return pops.Level(poppers, 100, 100, 100, 100, poppers, 100 / pops_per_s, None)


def test_pops_compare_the_largest_level_with_four_poppers() -> None:
    found = pops.PopsResult([pops_level(1, 500), pops_level(4, 1000), pops_level(64, 900)], {})
    assert [found.ratio(level) for level in found.levels] == pytest.approx([0.5, 1.0, 0.9])
    assert found.verdict() == [
        "64 poppers: 0.900x the pops/s of 4 (needs >= 1.00): NOT met",
        "every message popped exactly once at every level",
    ]
    without = pops.PopsResult([pops_level(1, 500), pops_level(16, 1000)], {})
    assert without.ratio(without.levels[0]) is None
    assert without.verdict()[0].startswith("no verdict")
