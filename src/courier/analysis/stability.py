"""Is a queue's backlog stable? A trend test on its depth over the measured interval.

The depth of one queue, sampled once per second, is regressed on time (least
squares). The backlog is *growing* when both hold:

1. the slope is significantly above zero: one-sided t-test, 95%, n - 2 degrees
   of freedom (H0: slope <= 0);
2. the growth it implies over the measured interval (slope x seconds) is material:
   at least ``MIN_GROWTH`` messages and at least one second of the queue's arrivals.

The second condition keeps a queue whose depth wanders by a few messages, with
neighbouring samples alike (they are not independent), from being called growing
on a slope too small to matter; a backlog that cannot be worked off grows by far
more than that. Anything else is stable. Fewer than three samples, or samples at
one instant only, decide nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scipy import stats as sp_stats

from courier.analysis import stats

MIN_GROWTH = 10.0
"""Messages: the least growth over the measured interval that counts as growing."""


@dataclass(frozen=True, slots=True)
class Trend:
    """The depth trend of one queue: slope (messages/s) with its 95% interval,
    one-sided p-value, growth over the interval and the growth that would matter."""

    n: int
    slope: float
    ci_low: float
    ci_high: float
    p_growing: float
    growth: float
    material: float

    @property
    def stable(self) -> bool:
        return not (self.p_growing < 1 - stats.CONFIDENCE and self.growth >= self.material)


def one_sided_p(test: stats.SlopeTest) -> float:
    """P(T >= t) under slope = 0: the p-value of 'the slope is above zero'."""
    return float(sp_stats.t.sf(test.t, test.n - 2))


def trend(regression: Mapping[str, Any], measured_s: float, arrivals_per_s: float) -> Trend | None:
    """The trend from ``stats.regression_exprs`` aggregates of depth on time."""
    test = stats.slope_test(regression)
    if test is None:
        return None
    return Trend(
        n=test.n,
        slope=test.slope,
        ci_low=test.ci_low,
        ci_high=test.ci_high,
        p_growing=one_sided_p(test),
        growth=test.slope * measured_s,
        material=max(MIN_GROWTH, arrivals_per_s),
    )
