"""Driving one client: closed loop (iterations back to back) or open loop (Poisson).

Both drivers stop starting iterations at ``stop_at`` (a ``time.monotonic()``
instant) or once the client has made ``request_limit`` requests, and let the
iteration in progress finish, so every request the middleware saw also has its
client record.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from courier import errors

MAX_OPEN_IN_FLIGHT = 256
"""Open loop: iterations one client may have running; arrivals beyond it are dropped."""


class Paced(Protocol):
    """What the drivers need of a client's context: its random source."""

    rng: random.Random


ContextT = TypeVar("ContextT", bound=Paced)
Step = Callable[[ContextT], Awaitable[None]]
"""One iteration of a client: a workload behaviour, or a benchmark handler or driver."""


@dataclass(slots=True)
class Tally:
    """What one client did: requests made (by its recorder), iterations, failures."""

    requests: int = 0
    iterations: int = 0
    errors: int = 0
    dropped_arrivals: int = 0
    last_error: str = ""


@dataclass(frozen=True, slots=True)
class Pacing:
    stop_at: float
    request_limit: int = 0  # 0 = no limit
    think_time_s: float = 0.0
    rate: float = 0.0  # > 0: open loop with this many arrivals per second


async def drive(ctx: ContextT, iteration: Step[ContextT], pacing: Pacing, tally: Tally) -> None:
    if pacing.rate > 0:
        await _open_loop(ctx, iteration, pacing, tally)
    else:
        await _closed_loop(ctx, iteration, pacing, tally)


def _running(pacing: Pacing, tally: Tally) -> bool:
    if pacing.request_limit and tally.requests >= pacing.request_limit:
        return False
    return time.monotonic() < pacing.stop_at


async def _closed_loop(
    ctx: ContextT, iteration: Step[ContextT], pacing: Pacing, tally: Tally
) -> None:
    while _running(pacing, tally):
        await _one(ctx, iteration, tally)
        if pacing.think_time_s:
            await asyncio.sleep(
                min(pacing.think_time_s, max(0.0, pacing.stop_at - time.monotonic()))
            )
        elif tally.iterations % 64 == 0:
            await asyncio.sleep(0)  # a behaviour that did no I/O must not starve the loop


async def _open_loop(
    ctx: ContextT, iteration: Step[ContextT], pacing: Pacing, tally: Tally
) -> None:
    running: set[asyncio.Task[None]] = set()
    next_at = time.monotonic()
    while True:
        next_at += ctx.rng.expovariate(pacing.rate)
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        if not _running(pacing, tally):
            break
        if len(running) >= MAX_OPEN_IN_FLIGHT:
            tally.dropped_arrivals += 1
            continue
        task = asyncio.create_task(_one(ctx, iteration, tally))
        running.add(task)
        task.add_done_callback(running.discard)
    if running:
        await asyncio.wait(running)


async def _one(ctx: ContextT, iteration: Step[ContextT], tally: Tally) -> None:
    try:
        await iteration(ctx)
    except errors.CourierError as exc:
        # Recorded already (status in the record); a load test carries on.
        tally.errors += 1
        tally.last_error = f"{type(exc).__name__}: {exc.message}"
    tally.iterations += 1
