"""Messages sent and popped per second, sampled once per interval for every viewer.

One background task reads the messages table's cumulative insert and delete counters
(PostgreSQL's table statistics) once per interval and keeps the samples in a ring
buffer; viewers read the buffer and never touch the database for rates.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from courier.console import rows

MIN_INTERVAL_S = 1.0
LATEST_OVER_S = 5.0  # the headline rate averages this much recent history

log = logging.getLogger(__name__)


class Sampler(Protocol):
    async def run(self) -> None: ...


S = TypeVar("S", bound=Sampler)


@dataclass(frozen=True, slots=True)
class Sample:
    at: float  # seconds since the epoch
    inserted: int  # messages ever stored (cumulative counter)
    deleted: int  # messages ever removed (cumulative counter)


ReadCounters = Callable[[], Awaitable[tuple[int, int]]]


def rate_between(earlier: Sample, later: Sample) -> rows.RatePoint:
    """Per-second change; a counter that went backwards (a stats reset) counts as 0."""
    seconds = max(later.at - earlier.at, 1e-9)
    return rows.RatePoint(
        at=later.at,
        sent=max(later.inserted - earlier.inserted, 0) / seconds,
        popped=max(later.deleted - earlier.deleted, 0) / seconds,
    )


async def every(interval_s: float, sample_once: Callable[[], Awaitable[None]], what: str) -> None:
    """Sample forever on a fixed beat; a failed sample is skipped, not fatal."""
    while True:
        started = time.monotonic()
        try:
            await sample_once()
        except OSError as exc:  # includes TimeoutError
            log.warning("%s failed: %s", what, exc)
        except Exception:  # the database may be restarting; keep the console up
            log.exception("%s failed", what)
        elapsed = time.monotonic() - started
        await asyncio.sleep(max(interval_s - elapsed, 0.0))


def growth(samples: list[Sample], counter: str) -> int:
    """How much a counter grew across the samples; resets count as no growth."""
    values = [int(getattr(sample, counter)) for sample in samples]
    return sum(max(b - a, 0) for a, b in itertools.pairwise(values))


class RateSampler:
    """A ring buffer of counter samples, filled by ``run`` at most once per interval."""

    def __init__(self, read_counters: ReadCounters, interval_s: float, window_s: int) -> None:
        self.interval_s = max(interval_s, MIN_INTERVAL_S)
        self.window_s = window_s
        self._read_counters = read_counters
        self._samples: deque[Sample] = deque(maxlen=int(window_s / self.interval_s) + 1)

    async def sample_once(self) -> None:
        inserted, deleted = await self._read_counters()
        self._samples.append(Sample(time.time(), inserted, deleted))

    async def run(self) -> None:
        await every(self.interval_s, self.sample_once, "rate sample")

    def rates(self) -> rows.Rates:
        samples = list(self._samples)
        points = [rate_between(a, b) for a, b in itertools.pairwise(samples)]
        recent = samples[-(int(LATEST_OVER_S / self.interval_s) + 1) :]
        latest = rate_between(recent[0], recent[-1]) if len(recent) > 1 else None
        return rows.Rates(
            now=time.time(),
            interval_s=self.interval_s,
            window_s=self.window_s,
            sent_per_s=latest.sent if latest else 0.0,
            popped_per_s=latest.popped if latest else 0.0,
            sent_in_window=growth(samples, "inserted"),
            popped_in_window=growth(samples, "deleted"),
            points=points,
        )


@contextlib.asynccontextmanager
async def running(sampler: S) -> AsyncIterator[S]:
    """Run the sampler in the background for the duration of the block."""
    task = asyncio.create_task(sampler.run(), name=f"courier-console-{type(sampler).__name__}")
    try:
        yield sampler
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
