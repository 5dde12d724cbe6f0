"""`courier bench fuzz`'s verdict: what makes a run fail, and what does not."""

from __future__ import annotations

import dataclasses

import pytest

from courier.bench import fuzz, fuzzclients, fuzzgood

MIB = 1024 * 1024


def server(**changes: object) -> fuzz.ServerResult:
    fine = fuzz.ServerResult(
        address="127.0.0.1:7400", pid=1, alive=True, accepting=True, rss_start=40 * MIB,
        rss_max=60 * MIB, rss_end=60 * MIB, first_half_max=55 * MIB,
        second_half_max=60 * MIB, logged_errors=[],
    )  # fmt: skip
    return dataclasses.replace(fine, **changes)  # type: ignore[arg-type]


def result(
    servers: list[fuzz.ServerResult] | None = None,
    good: fuzzgood.GoodReport | None = None,
    tally: fuzzclients.Tally | None = None,
) -> fuzz.FuzzResult:
    good = good or fuzzgood.GoodReport("127.0.0.1:7400", sends=10, receives=10)
    tally = tally or fuzzclients.Tally(budget=0)
    tally.frames["mutated"] += 100
    return fuzz.FuzzResult(fuzz.Settings(), 2.0, tally, [good], servers or [server()], {})


def test_a_clean_run_passes() -> None:
    found = result()
    assert found.failures() == []
    assert found.verdict()[-1].startswith("passed")
    assert found.as_json()["verdict"]["passed"] is True


@pytest.mark.parametrize(
    ("changes", "failure"),
    [
        ({"alive": False}, "died"),
        ({"accepting": False}, "stopped accepting"),
        ({"second_half_max": 120 * MIB}, "memory kept growing"),
    ],
)
def test_a_server_in_trouble_fails_the_run(changes: dict[str, object], failure: str) -> None:
    (found,) = result([server(**changes)]).failures()
    assert failure in found


def test_memory_within_a_quarter_and_32_mib_of_the_first_half_is_bounded() -> None:
    first = 100 * MIB
    assert server(first_half_max=first, second_half_max=int(first * 1.25) + 32 * MIB).bounded
    assert not server(first_half_max=first, second_half_max=int(first * 1.25) + 33 * MIB).bounded
    assert server(pid=None, first_half_max=None, second_half_max=None).bounded


@pytest.mark.parametrize(
    ("changes", "failure"),
    [({"errors": 2, "last_error": "Unavailable: x"}, "saw 2 errors"), ({"lost": 1}, "lost 1")],
)
def test_a_good_client_that_suffered_fails_the_run(
    changes: dict[str, object], failure: str
) -> None:
    good = dataclasses.replace(fuzzgood.GoodReport("127.0.0.1:7400"), **changes)  # type: ignore[arg-type]
    (found,) = result(good=good).failures()
    assert failure in found


def test_strangers_in_the_good_queue_are_reported_but_not_a_loss() -> None:
    good = fuzzgood.GoodReport("127.0.0.1:7400", sends=5, receives=5, foreign=2)
    found = result(good=good)
    assert found.failures() == []
    assert any("2 messages from fuzzed SENDs" in line for line in found.verdict())


@pytest.mark.parametrize("ending", fuzzclients.PROBLEMS)
def test_connections_ending_as_no_server_should_fail_the_run(ending: str) -> None:
    tally = fuzzclients.Tally(budget=0)
    tally.endings[ending] += 3
    tally.endings[fuzzclients.DROPPED_AFTER_ENDING] += 50  # expected: not a failure
    assert result(tally=tally).failures() == [f"3 connections: {ending}"]


def test_malformed_replies_fail_the_run() -> None:
    tally = fuzzclients.Tally(budget=0, malformed_replies=1)
    assert result(tally=tally).failures() == ["1 malformed replies"]
