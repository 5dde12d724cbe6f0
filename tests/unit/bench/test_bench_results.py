"""Benchmark arithmetic: percentiles, per-level results, ratios, the JSON document.

Percentiles are checked against ``statistics.quantiles`` (the standard library's
own implementation of the same definition) and against a worked textbook example;
nothing here derives the expected values from the code under test.
"""

from __future__ import annotations

import json
import random
import statistics

import numpy
import pytest

from courier.bench import results

MS = 1_000_000  # ns


def ns(*milliseconds: float) -> results.LatencyArray:
    return numpy.array([round(value * MS) for value in milliseconds], dtype=numpy.int64)


def test_percentiles_agree_with_the_standard_library() -> None:
    rng = random.Random(7)
    samples = [rng.randrange(50_000, 40_000_000) for _ in range(1_001)]
    # quantiles(n=100, method="inclusive") returns the 1st..99th percentiles.
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    found = results.percentiles(numpy.array(samples, dtype=numpy.int64))
    assert found is not None
    assert found.p50_ms == pytest.approx(cuts[49] / MS, abs=1e-6)
    assert found.p90_ms == pytest.approx(cuts[89] / MS, abs=1e-6)
    assert found.p99_ms == pytest.approx(cuts[98] / MS, abs=1e-6)


def test_percentiles_of_a_worked_example() -> None:
    # 15, 20, 35, 40, 50 ms; linear interpolation at rank p/100 * (n - 1):
    # p50 -> rank 2 = 35; p90 -> rank 3.6 = 40 + 0.6 * 10 = 46; p99 -> 3.96 = 49.6
    found = results.percentiles(ns(50, 15, 40, 20, 35))
    assert found == results.Latency(p50_ms=35.0, p90_ms=46.0, p99_ms=49.6)


def test_no_latencies_have_no_percentiles() -> None:
    assert results.percentiles(ns()) is None


def test_a_level_adds_up_its_processes() -> None:
    first = results.ClientsReport("a", send_ns=ns(1, 2), pop_ns=ns(3, 4), empty_pops=1)
    second = results.ClientsReport(
        "b", send_ns=ns(5), pop_ns=ns(6), errors=2, last_error="ConnectionLost: gone"
    )
    level = results.combine("courier", 3, 2.0, [first, second])
    assert (level.sends, level.pops, level.operations) == (3, 3, 6)
    assert level.ops_per_s == 3.0  # 6 requests in 2 s
    assert level.cycles_per_s == 1.5  # 3 pops
    assert (level.empty_pops, level.errors, level.last_error) == (1, 2, "ConnectionLost: gone")
    # Over all six requests 1..6 ms: p50 at rank 2.5 -> 3.5 ms.
    assert level.latency is not None and level.latency.p50_ms == 3.5
    assert level.send_latency == results.percentiles(ns(1, 2, 5))
    assert level.pop_latency == results.percentiles(ns(3, 4, 6))


def test_a_level_without_requests_has_zero_throughput_and_no_latency() -> None:
    level = results.combine("rabbitmq", 1, 1.0, [results.ClientsReport("a", ns(), ns())])
    assert level.ops_per_s == 0.0
    assert level.latency is None


def level(
    system: str, clients: int, operations: int, p99_ms: float, round_number: int = 1
) -> results.LevelResult:
    latency = results.Latency(p99_ms / 2, p99_ms / 1.5, p99_ms)
    return results.LevelResult(
        system=system, clients=clients, duration_s=1.0, sends=operations // 2,
        pops=operations - operations // 2, empty_pops=0, errors=0, latency=latency,
        send_latency=latency, pop_latency=latency, round=round_number,
    )  # fmt: skip


def test_ratios_put_courier_over_each_peer_level_by_level() -> None:
    found = results.ratios(
        [
            level("courier", 1, 1000, 2.0),
            level("courier-db", 1, 500, 4.0),
            level("rabbitmq", 1, 4000, 1.0),
            level("courier", 16, 3000, 8.0),
            level("courier-db", 16, 6000, 2.0),
            level("rabbitmq", 64, 9000, 3.0),  # no Courier at 64: nothing to compare
        ]
    )
    assert found == [
        results.Ratio(clients=1, peer="courier-db", ops=2.0, p99=0.5),
        results.Ratio(clients=1, peer="rabbitmq", ops=0.25, p99=2.0),
        results.Ratio(clients=16, peer="courier-db", ops=0.5, p99=4.0),
    ]


def test_each_round_is_compared_with_courier_of_the_same_round() -> None:
    found = results.ratios(
        [
            level("courier", 4, 1000, 2.0, round_number=1),
            level("rabbitmq", 4, 500, 4.0, round_number=1),
            level("rabbitmq", 4, 2000, 1.0, round_number=2),
            level("courier", 4, 3000, 4.0, round_number=2),
            level("rabbitmq", 4, 800, 1.0, round_number=3),  # Courier's third round failed
        ]
    )
    assert found == [
        results.Ratio(clients=4, peer="rabbitmq", ops=2.0, p99=0.5, round=1),
        results.Ratio(clients=4, peer="rabbitmq", ops=1.5, p99=4.0, round=2),
    ]


def test_spreads_give_the_median_and_the_extremes_of_the_rounds() -> None:
    found = results.spreads(
        [
            results.Ratio(clients=64, peer="rabbitmq", ops=1.2, p99=0.5, round=1),
            results.Ratio(clients=64, peer="rabbitmq", ops=2.0, p99=None, round=2),
            results.Ratio(clients=64, peer="rabbitmq", ops=1.5, p99=0.7, round=3),
            results.Ratio(clients=64, peer="rabbitmq", ops=1.6, p99=0.4, round=4),
            results.Ratio(clients=1, peer="courier-db", ops=None, p99=None, round=1),
        ]
    )
    # ops 1.2, 1.5, 1.6, 2.0: the median is the mean of the middle two, 1.55; the p99
    # ratios 0.4, 0.5, 0.7 (one round had none): the median is the middle one.
    assert found == [
        results.RatioSpread(1, "courier-db", 0, None, None, None, None, None, None),
        results.RatioSpread(64, "rabbitmq", 4, pytest.approx(1.55), 1.2, 2.0, 0.5, 0.4, 0.7),
    ]


def test_a_ratio_over_nothing_is_none() -> None:
    assert results.ratio(3.0, 0.0) is None
    assert results.ratio(None, 2.0) is None
    assert results.ratio(3.0, float("nan")) is None
    assert results.ratio(3.0, 2.0) == 1.5


def test_the_document_is_strict_json_with_every_level_and_ratio() -> None:
    levels = [level("courier", 1, 1000, 2.0), level("courier-db", 1, 500, 4.0)]
    document = results.document({"clients": [1]}, levels, {"rabbitmq": "skipped"}, {})
    parsed = json.loads(json.dumps(document, allow_nan=False))
    assert [(r["system"], r["clients"], r["ops_per_s"]) for r in parsed["results"]] == [
        ("courier", 1, 1000.0),
        ("courier-db", 1, 500.0),
    ]
    assert parsed["results"][0]["latency"]["p99_ms"] == 2.0
    assert parsed["ratios"] == [
        {"clients": 1, "peer": "courier-db", "ops": 2.0, "p99": 0.5, "round": 1}
    ]
    assert parsed["ratio_spreads"] == [
        {"clients": 1, "peer": "courier-db", "rounds": 1, "ops_median": 2.0, "ops_min": 2.0,
         "ops_max": 2.0, "p99_median": 0.5, "p99_min": 0.5, "p99_max": 0.5}
    ]  # fmt: skip
    assert parsed["skipped"] == {"rabbitmq": "skipped"}


def test_the_environment_carries_the_pace_only_when_measured() -> None:
    assert "pace_ms" not in results.environment({})
    measured = results.environment({}, results.Pace(48.5, 51.0))
    assert measured["pace_ms"] == {"start": 48.5, "end": 51.0}
    described = results.Pace(48.5, 51.0).describe()
    assert "48.5 ms of CPU at the start and 51 ms at the end" in described


def test_a_pace_since_a_start_probes_the_end_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(results.host, "pace_ms", lambda: 31.5)
    assert results.Pace.since(28.0) == results.Pace(28.0, 31.5)
