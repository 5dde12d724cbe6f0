"""The writing half of a stream protocol: callers wait while the transport has paused
writing, and stop waiting when the connection is lost.

asyncio's streams give a protocol this through private classes; the client's and the
middleware's connections read in their protocol's callbacks instead of through a
stream, so they take it from here.
"""

from __future__ import annotations

import asyncio


class WriteFlow(asyncio.Protocol):
    """``drain`` waits while more is buffered for the peer than the transport's
    high-water mark; once the connection is lost (``fail_drains``), it raises
    ConnectionResetError. A subclass calls ``fail_drains`` from ``connection_lost``."""

    def __init__(self) -> None:
        self._resumed: asyncio.Future[None] | None = None  # while writing is paused
        self._lost = False

    def pause_writing(self) -> None:
        self._resumed = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        self._wake_drains(None)

    async def drain(self) -> None:
        """ConnectionResetError once the connection is lost."""
        if self._lost:
            raise ConnectionResetError("the connection is lost")
        if self._resumed is not None:
            await asyncio.shield(self._resumed)  # shared by every drain waiting

    def fail_drains(self) -> None:
        """The connection is lost (or given up): no drain waits any more."""
        self._lost = True
        self._wake_drains(ConnectionResetError("the connection is lost"))

    def _wake_drains(self, failure: Exception | None) -> None:
        resumed, self._resumed = self._resumed, None
        if resumed is None or resumed.done():
            return
        if failure is None:
            resumed.set_result(None)
        else:
            resumed.set_exception(failure)
            resumed.exception()  # seen: the drains waiting, if any, raise it
