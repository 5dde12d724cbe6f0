"""One timer for many deadlines: it goes off no later than the earliest one given.

A connection has a deadline per read (the server) or per call (the client), and
nearly all of them pass unused. Arming a timer for each (``asyncio.timeout``) costs
a handle in the event loop's heap and a context manager every time; a watchdog is
set again only when a deadline earlier than its own arrives, and its owner, when it
goes off, decides what is due and sets it for the next deadline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class Watchdog:
    """Calls ``on_due`` no later than the earliest loop time given to ``expect_by``
    since it last went off (or was cancelled)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, on_due: Callable[[], None]) -> None:
        self._loop = loop
        self._on_due = on_due
        self._timer: asyncio.Handle | None = None
        self._when = 0.0  # the loop time the timer is for, while there is one

    def expect_by(self, when: float) -> None:
        """Go off at ``when`` at the latest (it may go off sooner, for another)."""
        if self._timer is not None:
            if self._when <= when:
                return
            self._timer.cancel()
        # Kept here: for a time already (or nearly) due, uvloop's call_at returns a
        # plain handle, which cannot tell when it is for.
        self._when = when
        self._timer = self._loop.call_at(when, self._go_off)

    @property
    def armed(self) -> bool:
        """Whether it will go off (for some deadline given since it last did)."""
        return self._timer is not None

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _go_off(self) -> None:
        self._timer = None
        self._on_due()
