"""The measurement hook: one small record per client call, for the lab.

An ``AsyncClient`` built with ``recorder=callable`` hands every call's record to
that callable as soon as the call ends; without a recorder no record is built. The
fields mirror ``courier.lab.records.CLIENT_REQUESTS`` (the load generator adds the
run, process and behaviour columns).

Besides the wire status names (``OK``, ``QUEUE_EMPTY``, ...), ``status`` may be
``CONNECTION_LOST`` (the connection dropped while the call waited), ``TIMEOUT``
(no reply within the client's request timeout) or ``BAD_REPLY`` (the reply did not
decode); then ``bytes_received`` and
``deserialize_ns`` are 0 and ``response_ns`` runs until the call gave up.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple, TypeAlias

from courier import errors

CONNECTION_LOST = "CONNECTION_LOST"
TIMEOUT = "TIMEOUT"
BAD_REPLY = "BAD_REPLY"


class CallRecord(NamedTuple):
    """What one call cost, as the client saw it (durations in ns, from perf_counter_ns).

    A named tuple, as it is built on every recorded call: a tenth of what a frozen
    dataclass costs. The fields are those of a CLIENT_REQUESTS row after run id,
    process and behaviour, in order, so the lab can keep the record as it is.

    >>> CallRecord("127.0.0.1:7400", 7, 1, "ping", "OK", 0, 90_000, 800, 900, 12, 21).operation
    'ping'
    """

    server: str
    """host:port of the middleware the call went to"""
    client_id: int
    """the logged-in client's id; 0 before login"""
    request_id: int
    """unique per client object, across reconnects"""
    operation: str
    """lowercase opcode name: ping, send, read, ..."""
    status: str
    """reply status name, or CONNECTION_LOST / TIMEOUT"""
    start_ns: int
    """time.time_ns() when the call began"""
    response_ns: int
    """call start to reply decoded"""
    serialize_ns: int
    deserialize_ns: int
    bytes_sent: int
    bytes_received: int


Recorder: TypeAlias = Callable[[CallRecord], None]

new_call_record: Callable[[tuple[Any, ...]], CallRecord] = functools.partial(
    tuple.__new__, CallRecord
)
"""A ``CallRecord`` from a tuple of its values, for the hot path: a third of the cost
of ``CallRecord(...)``, whose generated ``__new__`` is a Python call."""


def local_status(exc: errors.CourierError) -> str:
    """The status of a call that ended without a reply."""
    if isinstance(exc, errors.ConnectionLost):
        return CONNECTION_LOST
    if isinstance(exc, errors.RequestTimeout):
        return TIMEOUT
    return BAD_REPLY
