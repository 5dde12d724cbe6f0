"""The field sums behind the component breakdown, mostly without a row join.

Every component is a sum or difference of client and server record fields, so its
mean over the matched requests needs only each field's sum over them. Each side
gives its sums on its own, per client, when both sides hold the same requests of
that client: its measured client records, and its server records whose request id
lies between the least and greatest of those. That is checked per client,
operation and outcome by the count and two independent hash sums of the request
ids, so a client whose requests differ in any way (a request without a server
record, a server record of an unmeasured request, an outcome the two sides
disagree on) fails the check, up to a collision of the two hash sums' 63 bits
(32 and 31: narrow enough that no sum overflows). Only those clients' records
are joined row by row. A run where every client checks out needs two scans and
no shuffle join, which is what keeps the breakdown cheap at tens of millions of
records.

A request key is unique per run and side once its client has logged in; requests
sent before login carry client id 0 (``ANONYMOUS``), whose keys repeat across
connections, and are never matched.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as sf

from courier.analysis import tables, transforms

CLIENT_PARTS = {
    "response_ns": ("response_ns",),
    "client_codec_ns": ("serialize_ns", "deserialize_ns"),
}
SERVER_PARTS = {
    "queued_ns": ("queued_ns",),
    "pool_wait_ns": ("pool_wait_ns",),
    "db_round_trip_ns": ("db_round_trip_ns",),
    "db_exec_ns": ("db_exec_ns",),
    "server_codec_ns": ("deserialize_ns", "serialize_ns"),
    "total_ns": ("total_ns",),
}
"""Each summed part of a record, as the sum of these fields of it."""
PARTS = (*CLIENT_PARTS, *SERVER_PARTS)
CLIENT = ("run_id", "client_id")
CLIENTS_SCHEMA = tables.arrow_schema(run_id=pa.string(), client_id=pa.int64())
RANGES_SCHEMA = tables.arrow_schema(
    run_id=pa.string(), client_id=pa.int64(), least=pa.int64(), greatest=pa.int64()
)
"""Driver-side rows sent to Spark: clients, and each client's range of request ids."""
ANONYMOUS = 0
"""The client id of requests recorded before login."""
GROUP = ("run_id", "client_id", "operation", "outcome")

Sums = dict[tuple[str, str], dict[str, int]]
"""Per (run id, operation): ``matched``, ``requests`` and the sum of each of ``PARTS``
over the measured (non-error) matched requests, in nanoseconds."""


def field_sums(measured: DataFrame, server: DataFrame, key: Column | None) -> Sums:
    """The sums of the matched requests: side by side where a client's two sides
    agree, through ``join_server`` (on ``key`` when given) where not."""
    measured, server = _identified(measured), _identified(server)
    client_rows = tables.collect(_client_groups(measured))
    ranges = _ranges(client_rows)
    if not ranges:
        return {}
    server_rows = tables.collect(_server_groups(server, _ranges_frame(measured, ranges)))
    agreeing, differing = _compare_clients(client_rows, server_rows)
    sums: Sums = defaultdict(lambda: defaultdict(int))
    for row in client_rows:
        if (row["run_id"], row["client_id"]) in agreeing:
            _add(sums, row, CLIENT_PARTS, count=True)
    for row in server_rows:
        if (row["run_id"], row["client_id"]) in agreeing:
            _add(sums, row, SERVER_PARTS, count=False)
    if differing:
        for row in _joined_groups(measured, server, key, differing):
            _add(sums, row, PARTS, count=True)
    return {group: dict(values) for group, values in sums.items()}


def join_server(client: DataFrame, server: DataFrame, key: Column | None = None) -> DataFrame:
    """Each classified client request beside the server record of the same request,
    matched on ``transforms.REQUEST_KEYS`` or, when given, on ``key``
    (``transforms.packed_key``), with the run, operation, outcome and ``PARTS``.

    Only what the sums need crosses the shuffle: each part travels as one column.
    """
    keys: list[str | Column] = [*transforms.REQUEST_KEYS] if key is None else [key.alias("_key")]
    on = list(transforms.REQUEST_KEYS) if key is None else ["_key"]
    server_side = server.select(*keys, *_parts(SERVER_PARTS))
    client_side = client.select(
        *keys,
        *(["run_id"] if key is not None else []),
        "operation",
        "outcome",
        *_parts(CLIENT_PARTS),
    )
    # Hash the server side of each shuffle partition rather than sort both sides:
    # every key is unique, so sorting 2n rows only to pair them is wasted work.
    joined = client_side.join(server_side.hint("shuffle_hash"), on=on, how="inner")
    kept = [c for c in client_side.columns if c != "_key"]
    return joined.select(*kept, *server_side.columns[len(on) :])


def _identified(records: DataFrame) -> DataFrame:
    """The records whose request key identifies one request (see ``ANONYMOUS``)."""
    return records.where((sf.col("client_id") != ANONYMOUS) & sf.col("request_id").isNotNull())


def _parts(parts: Mapping[str, tuple[str, ...]]) -> list[Column]:
    """Each part as a column of its name."""
    return [_part(fields).alias(name) for name, fields in parts.items()]


def _part(fields: tuple[str, ...]) -> Column:
    """A part of a record: the sum of its fields."""
    first, *rest = (sf.col(name) for name in fields)
    return sum(rest, first)


def _fingerprint() -> list[Column]:
    """Two independent hash sums of a group's request ids."""
    request = sf.col("request_id")
    return [
        sf.sum(sf.hash(request).cast("long")).alias("hash_a"),
        sf.sum(sf.shiftright(sf.xxhash64(request), 33)).alias("hash_b"),
    ]


def _sums(parts: Mapping[str, tuple[str, ...]]) -> list[Column]:
    return [sf.sum(_part(fields)).alias(name) for name, fields in parts.items()]


def _client_groups(measured: DataFrame) -> DataFrame:
    """Per client, operation and outcome: count, id range, fingerprint, client sums."""
    return measured.groupBy(*GROUP).agg(
        sf.count(sf.lit(1)).alias("n"),
        sf.min("request_id").alias("least"),
        sf.max("request_id").alias("greatest"),
        *_fingerprint(),
        *_sums(CLIENT_PARTS),
    )


def _server_groups(server: DataFrame, ranges: DataFrame) -> DataFrame:
    """The same per client, over the server records in that client's id range."""
    within = server.join(sf.broadcast(ranges), on=list(CLIENT)).where(
        sf.col("request_id").between(sf.col("least"), sf.col("greatest"))
    )
    outcome = transforms.outcome_of(sf.col("status")).alias("outcome")
    return within.groupBy(*CLIENT, "operation", outcome).agg(
        sf.count(sf.lit(1)).alias("n"), *_fingerprint(), *_sums(SERVER_PARTS)
    )


def _ranges(client_rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, int], tuple[int, int]]:
    """Each client's least and greatest measured request id."""
    found: dict[tuple[str, int], tuple[int, int]] = {}
    for row in client_rows:
        client = (row["run_id"], row["client_id"])
        least, greatest = found.get(client, (row["least"], row["greatest"]))
        found[client] = (min(least, row["least"]), max(greatest, row["greatest"]))
    return found


def _ranges_frame(
    records: DataFrame, ranges: Mapping[tuple[str, int], tuple[int, int]]
) -> DataFrame:
    rows = [(run, client, least, greatest) for (run, client), (least, greatest) in ranges.items()]
    return tables.local_frame(records.sparkSession, rows, RANGES_SCHEMA)


def _clients_frame(records: DataFrame, clients: Iterable[tuple[str, int]]) -> DataFrame:
    return tables.local_frame(records.sparkSession, clients, CLIENTS_SCHEMA)


def _compare_clients(
    client_rows: Iterable[Mapping[str, Any]], server_rows: Iterable[Mapping[str, Any]]
) -> tuple[set[tuple[str, int]], set[tuple[str, int]]]:
    """The clients whose server records are the very requests of their client
    records, each with the same operation and outcome (equal count and fingerprint
    in every group), and those whose server records differ. A client without server
    records is in neither: nothing of it can match."""

    def groups(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, int], set[tuple[Any, ...]]]:
        found: dict[tuple[str, int], set[tuple[Any, ...]]] = defaultdict(set)
        for row in rows:
            fingerprint = (row["operation"], row["outcome"], row["n"], row["hash_a"], row["hash_b"])
            found[(row["run_id"], row["client_id"])].add(fingerprint)
        return found

    client, server = groups(client_rows), groups(server_rows)
    agreeing = {key for key, found in server.items() if client.get(key) == found}
    return agreeing, set(server) - agreeing


def _joined_groups(
    measured: DataFrame, server: DataFrame, key: Column | None, clients: set[tuple[str, int]]
) -> list[dict[str, Any]]:
    """Per run, operation and outcome, the counts and sums of the given clients'
    requests that the row join matches."""
    chosen = _clients_frame(measured, clients)

    def of_chosen(records: DataFrame) -> DataFrame:
        return records.join(sf.broadcast(chosen), on=list(CLIENT), how="left_semi")

    joined = of_chosen(measured).transform(join_server, of_chosen(server), key)
    grouped = joined.groupBy("run_id", "operation", "outcome").agg(
        sf.count(sf.lit(1)).alias("n"),
        *[sf.sum(name).alias(name) for name in PARTS],
    )
    return tables.collect(grouped)


def _add(sums: Sums, row: Mapping[str, Any], parts: Iterable[str], *, count: bool) -> None:
    """Adds one group's row: its count to ``matched`` (and to ``requests`` unless it
    is errors), and its sums unless it is errors."""
    cell = sums[(row["run_id"], row["operation"])]
    measured = row["outcome"] != transforms.ERROR
    if count:
        cell["matched"] += row["n"]
        cell["requests"] += row["n"] if measured else 0
    if measured:
        for name in parts:
            cell[name] += row[name] or 0
