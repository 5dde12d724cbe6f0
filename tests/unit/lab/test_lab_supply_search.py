"""The BASE search: doubling until invalid, then bisection, within its run limit."""

from __future__ import annotations

import asyncio

import pytest

from courier.lab.supply import search, topology


def limits(start: int = 1, max_runs: int = 20, max_base: int = 1024) -> topology.SearchLimits:
    return topology.SearchLimits(start=start, max_runs=max_runs, max_base=max_base)


def run_search(largest_valid: int, bounds: topology.SearchLimits) -> search.Result:
    async def measure(base: int) -> search.Point:
        return search.Point(base, f"r{base}", base <= largest_valid)

    return asyncio.run(search.search(measure, bounds))


def test_it_doubles_then_bisects() -> None:
    result = run_search(11, limits())
    assert [p.base for p in result.points] == [1, 2, 4, 8, 16, 12, 10, 11]
    assert result.metric == 11 and result.settled


@pytest.mark.parametrize("largest_valid", [1, 2, 3, 5, 17, 63, 64, 100, 511])
def test_it_finds_the_largest_valid_base(largest_valid: int) -> None:
    result = run_search(largest_valid, limits())
    assert result.metric == largest_valid
    assert result.settled
    assert len(result.points) <= 2 * (largest_valid.bit_length() + 1)


def test_no_valid_base_gives_no_metric() -> None:
    result = run_search(0, limits(start=4))
    assert [p.base for p in result.points] == [4, 2, 1]
    assert result.metric is None and result.settled


def test_the_run_limit_ends_the_search() -> None:
    result = run_search(1000, limits(max_runs=3))
    assert [p.base for p in result.points] == [1, 2, 4]
    assert result.metric == 4 and not result.settled


def test_max_base_caps_the_growth() -> None:
    result = run_search(1000, limits(max_base=6))
    assert [p.base for p in result.points] == [1, 2, 4, 6]
    assert result.metric == 6 and result.settled


def test_an_undecided_run_counts_as_invalid() -> None:
    async def measure(base: int) -> search.Point:
        return search.Point(base, "r", None if base >= 4 else True)

    result = asyncio.run(search.search(measure, limits()))
    assert result.metric == 3
