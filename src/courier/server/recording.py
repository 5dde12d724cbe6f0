"""The measurement hook: one record per request, handed to an optional recorder.

With no recorder the server only takes a few ``perf_counter_ns`` readings per
request; with one, it also lets the backend fill a ``Timing`` and builds a
``RequestRecord``. Field meanings follow ``courier.lab.records.SERVER_REQUESTS``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple


class RequestRecord(NamedTuple):
    """What one request cost the middleware; instants are wall clock, the rest durations.

    A named tuple, as it is built on every recorded request: a tenth of what a
    frozen dataclass costs. The fields are those of a SERVER_REQUESTS row after run
    id and instance, in order, so the lab can keep the record as it is.
    """

    client_id: int  # 0 before login
    request_id: int
    operation: str  # lowercase opcode name, e.g. "send"
    status: str  # name of the status sent, e.g. "OK", "QUEUE_EMPTY"
    receive_ns: int  # wall-clock instant the whole frame had arrived
    queued_ns: int  # arrival to handler start
    pool_wait_ns: int
    db_round_trip_ns: int
    db_exec_ns: int
    deserialize_ns: int  # parsing the body
    serialize_ns: int  # encoding the reply
    total_ns: int  # arrival to reply written


Recorder = Callable[[RequestRecord], None]
"""Called once per answered request, on the event loop: keep it cheap."""
