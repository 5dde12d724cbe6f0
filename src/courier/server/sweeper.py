"""The sweeper: brings held messages back when their lease or delay ends, and expires
messages past their ttl.

Each middleware runs one. A sweep is one stored-function call that also says when
the next thing falls due, and the sweeper sleeps until then, at most ``MAX_PAUSE``,
so it also notices what other middleware scheduled. A handler that schedules
something sooner (a delayed send, a lease, a delayed NACK) calls ``due_in``, which
wakes it early. Rows another sweeper is working on are skipped, so any number of
middleware may sweep the same database. A message that comes back is announced like
any stored message, which wakes the receives waiting for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol

from courier.db import repository

log = logging.getLogger(__name__)

MAX_PAUSE = 1.0
"""Longest sleep between sweeps, in seconds."""

MIN_PAUSE = 0.005
"""Shortest sleep: a due time a hair in the future is not worth a busy loop."""

ERROR_PAUSE = 1.0
"""Sleep after a failed sweep (the database may be restarting)."""

BATCH = 1000
"""Rows of each kind one sweep handles; a full batch sweeps again at once."""


class SweepStore(Protocol):
    async def sweep(
        self, limit: int, *, timing: repository.Timing | None = None
    ) -> repository.Sweep: ...


class Sweeper:
    def __init__(self, store: SweepStore) -> None:
        self._store = store
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._next_due: float | None = None  # loop time of the next planned sweep
        self.on_sweep: Callable[[repository.Sweep], None] | None = None
        """Told what every sweep did (the metrics' returned and expired messages)."""

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def due_in(self, seconds: float) -> None:
        """Something falls due ``seconds`` from now: sweep then, if that is sooner."""
        loop = asyncio.get_running_loop()
        if self._next_due is None or loop.time() + seconds < self._next_due:
            self._wake.set()
            self._next_due = loop.time() + seconds

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._next_due = None  # what ``due_in`` plans during the sweep is kept
            pause = await self._sweep_once()
            planned = loop.time() + pause
            if self._next_due is None or planned < self._next_due:
                self._next_due = planned
            await self._sleep_until_due()

    async def _sweep_once(self) -> float:
        """One sweep; how long to sleep before the next."""
        try:
            done = await self._store.sweep(BATCH)
        except Exception as exc:
            log.warning("sweeping held and expired messages failed: %s", exc)
            return ERROR_PAUSE
        if self.on_sweep is not None:
            self.on_sweep(done)
        if done.returned >= BATCH or done.expired >= BATCH:
            return 0.0
        if done.next_due is None:
            return MAX_PAUSE
        wait = (done.next_due - datetime.now(UTC)).total_seconds()
        return min(max(wait, MIN_PAUSE), MAX_PAUSE)

    async def _sleep_until_due(self) -> None:
        loop = asyncio.get_running_loop()
        while self._next_due is not None:
            remaining = self._next_due - loop.time()
            if remaining <= 0:
                return
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), remaining)
