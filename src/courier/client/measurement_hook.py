"""The measurement hook: one small record per client call, for the lab.

An ``AsyncClient`` built with ``recorder=callable`` hands every call's ``CallRow`` to
that callable as soon as the call ends; without a recorder no row is built. The
fields are those of ``courier.measurements.record_schema.CLIENT_REQUESTS`` after
run id, process and behaviour, which the load generator adds. A LOGIN's row carries
the client id from its reply, as the middleware's record of it does.

Besides the wire status names (``OK``, ``QUEUE_EMPTY``, ...), ``status`` may be
``CONNECTION_LOST`` (the connection dropped while the call waited), ``TIMEOUT``
(no reply within the client's request timeout) or ``BAD_REPLY`` (the reply did not
decode); then ``bytes_received`` and
``deserialize_ns`` are 0 and ``response_ns`` runs until the call gave up.

``message_ids`` holds the ids of the messages the call stored (a send: one per
queue; a publish: one per subscription; a commit: those of its sends and
publishes, in order, a publish's with queue 0) or read (a read, receive or awaited
response; a batch request: every message), and ``queue_ids`` the queue of each;
both are empty for every other call and for a call that failed. A READ is recorded
as ``pop`` or ``peek``, so that the analysis can tell the read that took a message
from one that only looked at it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, TypeAlias

from courier import errors, protocol

CONNECTION_LOST = "CONNECTION_LOST"
TIMEOUT = "TIMEOUT"
BAD_REPLY = "BAD_REPLY"


class CallRecord(NamedTuple):
    """What one call cost, as the client saw it (durations in ns, from perf_counter_ns).

    The names of a ``CallRow``'s values: ``CallRecord._make(row)``.

    >>> row = ("127.0.0.1:7400", 7, 1, "ping", "OK", 0, 90_000, 800, 900, 12, 21, (), ())
    >>> CallRecord._make(row).operation
    'ping'
    """

    server: str
    """host:port of the middleware the call went to"""
    client_id: int
    """the logged-in client's id (for a LOGIN, the one it logged in as); 0 before login"""
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
    message_ids: tuple[int, ...]
    """messages stored (send) or read (pop, peek, receive, await_response)"""
    queue_ids: tuple[int, ...]
    """the queue of each message id"""


Ids: TypeAlias = tuple[int, ...]
CallRow: TypeAlias = tuple[str, int, int, str, str, int, int, int, int, int, int, Ids, Ids]
"""One call's record as the recorder gets it: the values of ``CallRecord``'s fields,
in order, in a plain tuple, built once: the lab keeps it as it is until its writer
takes it. (The garbage collector stops tracking a plain tuple of plain values but
never a named tuple, and a plain tuple costs a third as much to build.)"""

Recorder: TypeAlias = Callable[[CallRow], None]
"""Called once per call, on the event loop: keep it cheap."""


NO_IDS: tuple[Ids, Ids] = ((), ())


def message_ids(request: protocol.Request, reply: protocol.Reply) -> tuple[Ids, Ids]:
    """The ids a successful reply carries, and the queue of each.

    A send's ids come in the order of its queues. Kept to a type test or two: it
    runs once per recorded call.
    """
    if isinstance(reply, protocol.MessageReply):
        message = reply.message
        return (message.id,), (message.queue,)
    if isinstance(reply, protocol.MessageIdsReply) and isinstance(request, protocol.Send):
        return reply.ids, request.queue_ids
    if isinstance(reply, protocol.PublishReply):
        return reply.message_ids, reply.queue_ids
    if isinstance(reply, protocol.CommitReply) and isinstance(request, protocol.Commit):
        return commit_ids(request, reply)
    return _batch_ids(request, reply)


def commit_ids(request: protocol.Commit, reply: protocol.CommitReply) -> tuple[Ids, Ids]:
    """The ids a commit stored, operation by operation: a send's in the order of its
    queues; a publish's copies with queue 0, as its reply does not name their queues."""
    ids: list[int] = []
    queues: list[int] = []
    for operation, stored in zip(request.operations, reply.results, strict=True):
        ids.extend(stored)
        if isinstance(operation, protocol.Send):
            queues.extend(operation.queue_ids)
        else:
            queues.extend([0] * len(stored))
    return tuple(ids), tuple(queues)


def _batch_ids(request: protocol.Request, reply: protocol.Reply) -> tuple[Ids, Ids]:
    """A batch reply's ids, by shape: messages read (``messages``), or per message
    sent the ids of its copies, in the order of the request's ``queue_ids``."""
    messages = getattr(reply, "messages", None)
    if messages is not None:
        return tuple(m.id for m in messages), tuple(m.queue for m in messages)
    per_message = getattr(reply, "ids", None)
    queues = getattr(request, "queue_ids", None)
    if per_message and queues and isinstance(per_message[0], tuple):
        ids = tuple(i for copies in per_message for i in copies)
        return ids, tuple(queues) * len(per_message)
    return NO_IDS


def local_status(exc: errors.CourierError) -> str:
    """The status of a call that ended without a reply."""
    if isinstance(exc, errors.ConnectionLost):
        return CONNECTION_LOST
    if isinstance(exc, errors.RequestTimeout):
        return TIMEOUT
    return BAD_REPLY
