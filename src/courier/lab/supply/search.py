"""The largest valid BASE: grow (doubling) while runs are valid, then bisect.

    result = await search(measure, topology.SearchLimits(start=1, max_runs=8))
    result.metric          # the largest valid BASE measured, None if none was

``measure(base)`` runs the benchmark at that BASE and returns its ``Point``. From
``start`` the search doubles BASE until a run is invalid (or ``max_base`` is
reached), then bisects between the largest valid BASE and the smallest invalid one
above it until they are adjacent. It stops after ``max_runs`` runs in any case, so
it always ends; a run without a verdict counts as invalid.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from courier.lab.supply import topology


@dataclass(frozen=True)
class Point:
    """One run of the search: its BASE, verdict and the evidence against it."""

    base: int
    run_id: str
    valid: bool | None
    failing: list[str] = field(default_factory=list)
    p90_ms: dict[str, float | None] = field(default_factory=dict)  # per interaction


@dataclass(frozen=True)
class Result:
    points: list[Point]
    limits: topology.SearchLimits

    @property
    def metric(self) -> int | None:
        """The largest valid BASE below the smallest invalid one above it."""
        low, _ = bracket(self.points)
        return low or None

    @property
    def settled(self) -> bool:
        """Whether the search closed in on the metric (rather than ran out of runs)."""
        return _closed(self.points, self.limits)


def bracket(points: list[Point]) -> tuple[int, int | None]:
    """The largest valid BASE (0: none) and the smallest invalid BASE above it."""
    low = max((p.base for p in points if p.valid), default=0)
    high = min((p.base for p in points if not p.valid and p.base > low), default=None)
    return low, high


def _closed(points: list[Point], limits: topology.SearchLimits) -> bool:
    low, high = bracket(points)
    if high is None:
        return low >= limits.max_base
    return high - low <= 1


def next_base(points: list[Point], limits: topology.SearchLimits) -> int | None:
    """The BASE to run next, or None when the search is over."""
    if not points:
        return limits.start
    if len(points) >= limits.max_runs or _closed(points, limits):
        return None
    low, high = bracket(points)
    if high is None:
        return min(low * 2, limits.max_base)
    return (low + high) // 2


async def search(
    measure: Callable[[int], Awaitable[Point]], limits: topology.SearchLimits
) -> Result:
    points: list[Point] = []
    while (base := next_base(points, limits)) is not None:
        points.append(await measure(base))
    return Result(points, limits)
