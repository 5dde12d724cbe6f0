"""The measurement record schema: the contract between every tier and the analysis.

Each record kind is one Parquet dataset inside a run directory
(``<run>/<kind>/<process>-<n>.parquet``). Fields are defined once here; the Spark
schema in ``courier.analysis.io`` is derived from them. The request hooks' rows
(``CallRecord`` in ``courier.client.measurement_hook``, ``RequestRecord`` in
``courier.server.measurement_hook``) hold a kind's fields after the leading ones, in
order, and a test holds them to it. docs/measurements.md documents every field.

Time conventions: instants (``*_ns`` named ``start_ns``, ``receive_ns``, ``ts_ns``)
are wall-clock nanoseconds since the Unix epoch (``time.time_ns()``), corrected by
the process's measured clock offset; durations (every other ``*_ns``) come from
``time.perf_counter_ns()`` differences and are never negative.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    type: pa.DataType
    doc: str


ID_LIST = pa.list_(pa.int64())
"""Message and queue ids of one request: empty for most, one id for a single send or
read, several for a send to several queues (and for batch requests)."""

CLIENT_REQUESTS = "client_requests"
SERVER_REQUESTS = "server_requests"
RESOURCES = "resources"
GC_PAUSES = "gc_pauses"
DB_STATS = "db_stats"
QUEUE_DEPTHS = "queue_depths"
REPLICA_SAMPLES = "replica_samples"
CLUSTER_DECISIONS = "cluster_decisions"
CLUSTER_KINDS = (REPLICA_SAMPLES, CLUSTER_DECISIONS)
"""Written by `courier controller` alone, so only cluster experiments have them."""

FIELDS: dict[str, tuple[Field, ...]] = {
    CLIENT_REQUESTS: (
        Field("run_id", pa.string(), "run this record belongs to"),
        Field("process", pa.string(), "load-generator process name"),
        Field("behaviour", pa.string(), "workload behaviour of the client"),
        Field("server", pa.string(), "host:port of the middleware the request went to"),
        Field("client_id", pa.int64(), "Courier client id"),
        Field("request_id", pa.int64(), "request id, unique per client"),
        Field("operation", pa.string(), "operation name, e.g. send, pop"),
        Field("status", pa.string(), "response status name, e.g. OK, QUEUE_EMPTY"),
        Field("start_ns", pa.int64(), "instant the client began the call"),
        Field("response_ns", pa.int64(), "response time: call start to decoded reply"),
        Field("serialize_ns", pa.int64(), "time to encode the request"),
        Field("deserialize_ns", pa.int64(), "time to decode the reply"),
        Field("bytes_sent", pa.int64(), "request frame size"),
        Field("bytes_received", pa.int64(), "reply frame size"),
        Field("message_ids", ID_LIST, "ids of the messages the call stored or read"),
        Field("queue_ids", ID_LIST, "queue of each of message_ids, in the same order"),
    ),
    SERVER_REQUESTS: (
        Field("run_id", pa.string(), "run this record belongs to"),
        Field("instance", pa.string(), "middleware instance name (host:port)"),
        Field("client_id", pa.int64(), "Courier client id (0 before login)"),
        Field("request_id", pa.int64(), "request id from the frame header"),
        Field("operation", pa.string(), "operation name, as the client names it"),
        Field("status", pa.string(), "response status name"),
        Field("receive_ns", pa.int64(), "instant the whole frame had arrived"),
        Field("queued_ns", pa.int64(), "frame arrival to handler start"),
        Field("pool_wait_ns", pa.int64(), "waiting for a database connection"),
        Field("db_round_trip_ns", pa.int64(), "stored-function call, as the middleware saw it"),
        Field("db_exec_ns", pa.int64(), "execution inside the database, reported by it"),
        Field("deserialize_ns", pa.int64(), "time to decode the request body"),
        Field("serialize_ns", pa.int64(), "time to encode the reply"),
        Field("total_ns", pa.int64(), "frame arrival to reply written"),
    ),
    RESOURCES: (
        Field("run_id", pa.string(), "run this record belongs to"),
        Field("process", pa.string(), "process name"),
        Field("tier", pa.string(), "client, middleware, database or runner"),
        Field("ts_ns", pa.int64(), "sample instant"),
        Field("cpu_percent", pa.float64(), "CPU use over the last interval (100 = one core)"),
        Field("rss_bytes", pa.int64(), "resident set size"),
    ),
    GC_PAUSES: (
        Field("run_id", pa.string(), "run this record belongs to"),
        Field("process", pa.string(), "process name"),
        Field("ts_ns", pa.int64(), "instant the collection started"),
        Field("generation", pa.int32(), "collected generation"),
        Field("duration_ns", pa.int64(), "pause length"),
        Field("collected", pa.int64(), "objects collected"),
    ),
    DB_STATS: (
        Field("run_id", pa.string(), "run this record belongs to"),
        Field("ts_ns", pa.int64(), "sample instant"),
        Field("db_size_bytes", pa.int64(), "pg_database_size of the Courier database"),
        Field("xact_commit", pa.int64(), "committed transactions since the stats reset"),
        Field("xact_rollback", pa.int64(), "rolled back transactions since the stats reset"),
        Field("messages", pa.int64(), "messages stored in all queues"),
    ),
    QUEUE_DEPTHS: (
        Field("run_id", pa.string(), "run this record belongs to"),
        Field("ts_ns", pa.int64(), "sample instant"),
        Field("queue_id", pa.int64(), "queue id"),
        Field("messages", pa.int64(), "messages in the queue"),
    ),
    REPLICA_SAMPLES: (
        Field("run_id", pa.string(), "run this record belongs to"),
        Field("ts_ns", pa.int64(), "sample instant (one per controller round)"),
        Field("replicated", pa.string(), "replicated queue name"),
        Field("member", pa.int32(), "member number"),
        Field("queue_id", pa.int64(), "the member's queue"),
        Field("node", pa.int32(), "node holding the member"),
        Field("producers", pa.int32(), "producers given this member"),
        Field("consumers", pa.int32(), "consumers given this member"),
        Field("length", pa.int64(), "visible messages in the member (counted up to 10,000)"),
        Field("production_rate", pa.float64(), "messages/s stored in it since the last round"),
        Field("consumption_rate", pa.float64(), "messages/s taken from it since the last round"),
        Field("capacity", pa.int32(), "clients the member serves well (its node's capacity)"),
    ),
    CLUSTER_DECISIONS: (
        Field("run_id", pa.string(), "run this record belongs to"),
        Field("ts_ns", pa.int64(), "instant of the decision"),
        Field("replicated", pa.string(), "replicated queue name"),
        Field("decision", pa.string(), "add, remove or move"),
        Field("member", pa.int32(), "member added, removed, or moved from"),
        Field("node", pa.int32(), "node of the member added or removed; the target of a move"),
        Field("moved", pa.int32(), "messages moved (0 unless a move)"),
        Field("clients", pa.int32(), "producers and consumers of the queue"),
        Field("capacity", pa.int32(), "sum of the members' capacities after the decision"),
        Field("load", pa.float64(), "clients / capacity after the decision"),
        Field("length", pa.int64(), "messages in all members (the virtual length)"),
    ),
}


INSTANT_FIELDS = frozenset({"start_ns", "receive_ns", "ts_ns"})
"""The fields that are instants (wall clock, corrected by the clock offset)."""


def arrow_schema(kind: str) -> pa.Schema:
    """The Parquet schema of one record kind."""
    return pa.schema([pa.field(f.name, f.type, nullable=False) for f in FIELDS[kind]])


def field_names(kind: str) -> list[str]:
    return [f.name for f in FIELDS[kind]]
