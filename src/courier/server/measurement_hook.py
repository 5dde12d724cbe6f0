"""The measurement hook: one record per request, handed to an optional recorder.

With no recorder the server only takes a few ``perf_counter_ns`` readings per
request; with one, it also lets the backend fill a ``Timing`` and hands the
recorder a ``RequestRow``. Field meanings follow
``courier.measurements.record_schema.SERVER_REQUESTS``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, TypeAlias


class RequestRecord(NamedTuple):
    """What one request cost the middleware; instants are wall clock, the rest durations.

    The names of a ``RequestRow``'s values: ``RequestRecord._make(row)``. The fields
    are those of a SERVER_REQUESTS row after run id and instance, in order.
    """

    client_id: int  # 0 before login
    request_id: int
    operation: str  # names.operation_name: "send", "pop" (a READ that took), ...
    status: str  # name of the status sent, e.g. "OK", "QUEUE_EMPTY"
    receive_ns: int  # wall-clock instant the whole frame had arrived
    queued_ns: int  # arrival to handler start
    pool_wait_ns: int
    db_round_trip_ns: int
    db_exec_ns: int
    deserialize_ns: int  # parsing the body
    serialize_ns: int  # encoding the reply
    total_ns: int  # arrival to reply written


RequestRow: TypeAlias = tuple[int, int, str, str, int, int, int, int, int, int, int, int]
"""One request's record as the recorder gets it: the values of ``RequestRecord``'s
fields, in order, in a plain tuple. The lab keeps thousands of rows until its writer
takes them, and the garbage collector stops tracking a plain tuple of plain values
but never a named tuple; and building one costs a third of building a named tuple.
On a middleware whose database connections are all busy, every microsecond the
event loop spends delays their release, so this hook is kept lean."""

Recorder: TypeAlias = Callable[[RequestRow], None]
"""Called once per answered request, on the event loop: keep it cheap."""
