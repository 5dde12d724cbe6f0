"""Pure DataFrame -> DataFrame steps, chained with ``DataFrame.transform``.

Each function starts and ends by selecting its columns, so what goes in and what
comes out is visible at a glance. None of them triggers a Spark job.

Outcomes: status ``OK`` is ``ok``; ``QUEUE_EMPTY`` and ``NO_MESSAGE`` are ``miss``,
the normal answer of a read that found nothing (counted apart, but their response
times are real work and are kept in the latency figures); any other status is an
``error``, counted and kept out of the latency figures.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as sf

from courier.analysis import io, trimming
from courier.measurements import record_schema

OK = "ok"
MISS = "miss"
ERROR = "error"
OUTCOMES = (OK, MISS, ERROR)
"""The outcomes, each at the index that is its code (``outcome_code``)."""
OUTCOME_CODES = (OK_CODE, MISS_CODE, ERROR_CODE) = (0, 1, 2)
MISS_STATUSES = ("QUEUE_EMPTY", "NO_MESSAGE")
NS_PER_MS = 1e6
NS_PER_S = 1e9

CLIENT_COLUMNS = io.SPARK_SCHEMAS[record_schema.CLIENT_REQUESTS].fieldNames()
CLASSIFIED_COLUMNS = [*CLIENT_COLUMNS, "outcome", "latency_ms"]


def millis(column: str) -> Column:
    return sf.col(column) / NS_PER_MS


def outcome_of(status: Column) -> Column:
    return _by_status(status, *OUTCOMES)


def _by_status(status: Column, ok: str | int, miss: str | int, error: str | int) -> Column:
    """``ok``, ``miss`` or ``error``, as the status is."""
    return (
        sf.when(status == "OK", sf.lit(ok))
        .when(status.isin(*MISS_STATUSES), sf.lit(miss))
        .otherwise(sf.lit(error))
    )


def outcome_code(status: Column) -> Column:
    """The outcome as its index in ``OUTCOMES``: an aggregation that tests the outcome
    of every record several times, and groups by it, compares numbers faster than
    strings."""
    return _by_status(status, *OUTCOME_CODES)


def outcome_named(code: Column) -> Column:
    """The outcome an ``outcome_code`` stands for."""
    return _at(OUTCOMES, code)


def _at(values: Sequence[str | int], index: Column) -> Column:
    """``values[index]`` from an array literal: a lookup by number; null for a null
    index."""
    return sf.element_at(sf.array(*(sf.lit(v) for v in values)), (index + 1).cast("int"))


def classify(requests: DataFrame) -> DataFrame:
    """Client requests with ``outcome`` and ``latency_ms`` (null for errors)."""
    outcome = outcome_of(sf.col("status"))
    latency = sf.when(outcome != ERROR, millis("response_ns"))
    return requests.select(*CLIENT_COLUMNS, outcome.alias("outcome"), latency.alias("latency_ms"))


def bound(bounds: Iterable[trimming.Bounds], field: str, run_id: str = "run_id") -> Column:
    """Each record's run's ``field`` of its bounds (null for a run without bounds).

    The bounds are a handful of literals in one CASE expression: cheaper than a join
    with a bounds table, whose broadcast costs a Spark job in every query that uses it.
    """
    value: Column | None = None
    for b in bounds:
        test = sf.col(run_id) == sf.lit(b.run_id)
        value = (sf.when if value is None else value.when)(test, sf.lit(getattr(b, field)))
    return sf.lit(None).cast("long") if value is None else value


RUN = "run"


def with_run(records_df: DataFrame, bounds: Sequence[trimming.Bounds], instant: str) -> DataFrame:
    """Adds ``run``: the index in ``bounds`` of each record's run, or null when
    ``instant`` lies outside that run's whole extent (or the run has no bounds).

    One CASE over the run ids, computed once per record: the steps after it read each
    bound with ``of_run``, by number. ``bound`` instead matches the run id again in
    every expression that uses it, which costs a string comparison per run each time.
    Spark keeps this column computed once only while nothing filters on what is
    derived from it (a filter is pushed below it with the CASE written in again).
    """
    at = sf.col(instant)
    index: Column = sf.lit(None).cast("int")
    for position, b in reversed(list(enumerate(bounds))):
        inside = (sf.col("run_id") == b.run_id) & (at >= b.start_ns) & (at < b.end_ns)
        index = sf.when(inside, sf.lit(position)).otherwise(index)
    return records_df.select(*records_df.columns, index.alias(RUN))


def of_run(values: Sequence[int], run: str = RUN) -> Column:
    """The value of each record's run: ``values`` holds one per run, in the order of
    the bounds ``with_run`` was given, and ``run`` indexes it; null for a null index."""
    return _at(values, sf.col(run))


def trim(records_df: DataFrame, bounds: Iterable[trimming.Bounds], instant: str) -> DataFrame:
    """Only the records whose ``instant`` lies in their run's measured interval
    (``keep_from_ns <= instant < keep_until_ns``): one CASE, so each record's run id
    is matched once, not once per bound."""
    at = sf.col(instant)
    inside: Column = sf.lit(False)
    for b in reversed(list(bounds)):
        test = sf.col("run_id") == b.run_id
        inside = sf.when(test, (at >= b.keep_from_ns) & (at < b.keep_until_ns)).otherwise(inside)
    return records_df.where(inside)


def with_run_time(
    records_df: DataFrame, bounds: Iterable[trimming.Bounds], instant: str
) -> DataFrame:
    """Adds ``t_s``: seconds from the run's start to ``instant`` (runs without bounds
    are left out)."""
    columns = records_df.columns
    start = bound(bounds, "start_ns")
    t_s = (sf.col(instant) - start) / NS_PER_S
    return records_df.where(start.isNotNull()).select(*columns, t_s.alias("t_s"))


REQUEST_KEYS = ("run_id", "client_id", "request_id")
"""What identifies a request in both the client and the server records."""


def packed_key(run_ids: Sequence[str], ranges: Mapping[str, tuple[int, int]]) -> Column | None:
    """A request's key as one long: ``(run index * clients + client) * requests + request``
    with each id counted from its least value (``ranges``: least and greatest of
    ``client_id`` and ``request_id``); None when that does not fit in a long.

    A join on one long key hashes and compares one number instead of a string and two
    longs per row. A run not in ``run_ids`` gets a null key, which joins nothing.
    """
    (client_low, client_high), (request_low, request_high) = (
        ranges["client_id"],
        ranges["request_id"],
    )
    clients, requests = client_high - client_low + 1, request_high - request_low + 1
    if len(run_ids) * clients * requests >= 2**63:
        return None
    client = sf.col("client_id") - sf.lit(client_low)
    request = sf.col("request_id") - sf.lit(request_low)
    return (run_index(run_ids) * sf.lit(clients) + client) * sf.lit(requests) + request


def run_index(run_ids: Sequence[str]) -> Column:
    """A record's ``run_id`` as its index in ``run_ids`` (null for another run): a
    number hashes and compares faster than a string in joins and aggregations."""
    index: Column = sf.lit(None).cast("long")
    for position, run_id in enumerate(run_ids):
        index = sf.when(sf.col("run_id") == run_id, sf.lit(position)).otherwise(index)
    return index


def run_id_of(run_ids: Sequence[str], index: str = "run") -> Column:
    """The run id an index of ``run_index`` stands for."""
    name: Column = sf.lit(None).cast("string")
    for position, run_id in enumerate(run_ids):
        name = sf.when(sf.col(index) == position, sf.lit(run_id)).otherwise(name)
    return name
