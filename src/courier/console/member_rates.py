"""Production and consumption rates of the members of replicated queues.

Every middleware reports its running totals per member to the control node
(``courier_member_counts``); a member's totals are the sum over the middleware, and
its rate is their change between two reads. As with ``rates``, one background task
reads the totals once per interval for every viewer, and keeps a few seconds of
samples; viewers never touch the database for member rates.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from courier.console import rates

Totals = dict[int, tuple[int, int]]
"""Member queue id -> (messages ever stored in it, messages ever taken from it)."""
ReadTotals = Callable[[], Awaitable[Totals]]


@dataclass(frozen=True, slots=True)
class MemberRate:
    produced: float  # messages stored per second
    consumed: float  # messages taken per second


@dataclass(frozen=True, slots=True)
class TotalsSample:
    at: float  # seconds since the epoch
    totals: Totals


def between(earlier: TotalsSample, later: TotalsSample) -> dict[int, MemberRate]:
    """Per-second change of every member counted in both samples; totals that went
    back (a member made again under the same id) count as 0."""
    seconds = max(later.at - earlier.at, 1e-9)
    found = {}
    for queue, (sent, taken) in later.totals.items():
        if queue in earlier.totals:
            sent_before, taken_before = earlier.totals[queue]
            found[queue] = MemberRate(
                max(sent - sent_before, 0) / seconds, max(taken - taken_before, 0) / seconds
            )
    return found


class MemberSampler:
    """The last few seconds of member totals, filled by ``run`` once per interval."""

    def __init__(self, read_totals: ReadTotals, interval_s: float) -> None:
        self.interval_s = max(interval_s, rates.MIN_INTERVAL_S)
        self._read_totals = read_totals
        self._samples: deque[TotalsSample] = deque(
            maxlen=int(rates.LATEST_OVER_S / self.interval_s) + 1
        )

    async def sample_once(self) -> None:
        self._samples.append(TotalsSample(time.time(), await self._read_totals()))

    async def run(self) -> None:
        await rates.every(self.interval_s, self.sample_once, "member rate sample")

    def rates(self) -> dict[int, MemberRate]:
        """Each member's rates over the samples kept; a member seen in one sample
        only (or before the second sample) has none yet."""
        if len(self._samples) < 2:
            return {}
        return between(self._samples[0], self._samples[-1])
