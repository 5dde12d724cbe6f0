"""Collector settings for Courier's long-running processes.

A middleware or a load-generator process serving hundreds of connections holds
tens of thousands of live container objects (tasks, futures, frames, buffers).
With CPython's default thresholds (a young collection every 700 net allocations)
the collector ran thousands of times a minute there, and its older generations
walked all of those objects: at 1,024 clients it took a sixth of each process's CPU
and stalled the event loop for about 27 ms per full collection. Almost everything
such a process allocates dies by reference counting, so collecting far less often
frees the same memory.
"""

from __future__ import annotations

import gc

THRESHOLDS = (10_000, 20, 20)
"""Young collections every 10,000 net allocations (default 700); the older
generations every 20 of the one below (default 10)."""


def tune_for_serving() -> None:
    """Collect rarely, and leave the objects that already live for good (modules,
    start-up state) out of every future collection."""
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
