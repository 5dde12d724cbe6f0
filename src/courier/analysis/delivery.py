"""Delivery time: from the send of a message to the read that took it, per message.

Client records carry the ids of the messages a call stored or read
(``message_ids``, with ``queue_ids`` the queue of each). Every id a successful
call carried becomes one *event*: stored (by a send) or taken (by any other
operation that carried ids, except ``peek``, which leaves the message where it
was). One aggregation over the events of each (run, message) pairs a message's
send with its first delivery, without a join:

- delivered: sent and taken; delivery time = the taking call's reply instant
  (``start_ns + response_ns``) minus the send's ``start_ns``;
- backlog: sent and never taken within the run (still waiting at its end);
- unsent: taken, but its send has no record in the run (sent before it began).

A message belongs to the measured interval in which it was sent. Percentiles
come from a histogram with logarithmic buckets (``RELATIVE_ERROR`` wide), built
in the same pass as the moments, and the fates' counts too: every grouping comes
from one aggregation over the per-message rows. The percentiles' 95% intervals are the
distribution-free order-statistic intervals.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as sf

from courier.analysis import histograms as histograms_
from courier.analysis import stats, transforms, trimming
from courier.protocol import names

STORES = ("send", "send_many", "publish", "commit")
"""Operations whose ids are messages they stored (a commit: those of its sends and
publishes); other operations' ids were read."""
LOOKS = ("peek",)
"""Reads that leave the message in its queue: not deliveries."""

PERCENTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}
DEADLINE_MS = 5_000.0
"""The delivery-time bound of the validity criterion (90% within 5 s)."""
DELIVERED, BACKLOG, UNSENT, OUTSIDE = "delivered", "backlog", "unsent", "outside"

EVENT_COLUMNS = ("run", "message_id", "queue_id", "op", "stored", "at_ns")

# Operations travel as small codes through the per-message aggregation: with fixed-
# width values only, Spark aggregates in a hash table instead of sorting the events.
KNOWN = {name for name in names.OPERATIONS if not name.startswith("0x")}
OPERATIONS = ("", *sorted({*KNOWN, "pop", "peek", "send_many", "receive_many"}))


CARRIERS = (*STORES, "pop", "receive", "receive_many", "read", "peek")
"""The operations whose records carry message ids, looked up first."""


def operation_code(operation: Column) -> Column:
    """The operation's index in OPERATIONS (0 for an operation not listed there).

    Spark finds a key in a literal map by comparing it with each key in turn, so the
    map lists the operations that carry message ids first: an event's operation is
    found in a few comparisons instead of about thirty."""
    order = sorted(range(len(OPERATIONS)), key=lambda n: OPERATIONS[n] not in CARRIERS)
    codes = sf.create_map(*[sf.lit(v) for n in order for v in (OPERATIONS[n], n)])
    return sf.coalesce(sf.try_element_at(codes, operation), sf.lit(0))


def operation_name(code: int | None) -> str:
    """The operation a code stands for ('' for none)."""
    return OPERATIONS[code or 0]


MESSAGE_COLUMNS = (
    "run_id", "run", "message_id", "queue_id", "send_op", "receive_op", "sent_ns",
    "delivered_ns", "deliveries",
)  # fmt: skip
TIMED_COLUMNS = ("run_id", "queue_id", "send_op", "receive_op", "fate", "delivery_ns", "waited_ms")


def events(requests: DataFrame, run_ids: Sequence[str]) -> DataFrame:
    """One row per message id carried by a successful call: stored or taken, and when;
    ``run`` is the index of its run in ``run_ids`` (``transforms.run_index``)."""
    stored = sf.col("operation").isin(*STORES)
    carrying = requests.where(
        (sf.col("outcome") == transforms.OK)
        & (sf.size("message_ids") > 0)
        & ~sf.col("operation").isin(*LOOKS)
    )
    at_ns = sf.when(stored, sf.col("start_ns")).otherwise(
        sf.col("start_ns") + sf.col("response_ns")
    )
    code = operation_code(sf.col("operation"))
    exploded = carrying.select(
        transforms.run_index(run_ids).alias("run"),
        code.alias("op"),
        stored.alias("stored"),
        at_ns.alias("at_ns"),
        "queue_ids",
        sf.posexplode("message_ids").alias("position", "message_id"),
    )
    return exploded.select(
        "run",
        "message_id",
        sf.get("queue_ids", "position").alias("queue_id"),
        "op",
        "stored",
        "at_ns",
    )


def messages(message_events: DataFrame, run_ids: Sequence[str]) -> DataFrame:
    """One row per message: its send and its first delivery (null when there is none).
    The events of each (run, message) meet in a hash aggregation keyed by numbers only:
    the run's index in ``run_ids`` (as ``events`` gave it) and the message id.

    The events are shuffled by that key before any aggregation. A partial aggregation
    where they were read would hash every event into a table of millions of messages
    per task, which costs more than the shuffle of the events it saves (measured in
    docs/measurements.md, "Pipeline speed")."""
    stored, taken = sf.col("stored"), ~sf.col("stored")
    at = sf.col("at_ns")
    shuffled = message_events.repartition("run", "message_id")
    grouped = shuffled.groupBy("run", "message_id").agg(
        # A commit's publish does not know its copies' queues (0): the read does.
        sf.coalesce(
            sf.max(sf.when(stored & (sf.col("queue_id") > 0), sf.col("queue_id"))),
            sf.max("queue_id"),
        ).alias("queue_id"),
        sf.min_by("op", sf.when(stored, at)).alias("send_op"),
        sf.min_by("op", sf.when(taken, at)).alias("receive_op"),
        sf.min(sf.when(stored, at)).alias("sent_ns"),
        sf.min(sf.when(taken, at)).alias("delivered_ns"),
        sf.count(sf.when(taken, 1)).alias("deliveries"),
    )
    named = grouped.select(transforms.run_id_of(run_ids).alias("run_id"), *grouped.columns)
    return named.select(*MESSAGE_COLUMNS)


def timed(message_rows: DataFrame, bounds: Iterable[trimming.Bounds]) -> DataFrame:
    """Each message's fate, delivery time in ns (delivered ones) and time waited by the
    run's end in ms (backlog); a message belongs to the measured interval it was sent in.
    Its ``run`` indexes ``bounds``: the bounds of the runs ``events`` was given, in that
    order (so each limit is a lookup by number, not a match of the run id per limit)."""
    bounds = list(bounds)
    limits = {
        name: transforms.of_run([getattr(b, name) for b in bounds])
        for name in ("end_ns", "keep_from_ns", "keep_until_ns")
    }
    joined = message_rows.where(limits["end_ns"].isNotNull()).select(
        *MESSAGE_COLUMNS, *(value.alias(name) for name, value in limits.items())
    )
    sent = sf.col("sent_ns")
    measured = (sent >= sf.col("keep_from_ns")) & (sent < sf.col("keep_until_ns"))
    fate = (
        sf.when(sent.isNull(), sf.lit(UNSENT))
        .when(~measured, sf.lit(OUTSIDE))
        .when(sf.col("delivered_ns").isNull(), sf.lit(BACKLOG))
        .otherwise(sf.lit(DELIVERED))
    )
    delivery = sf.col("delivered_ns") - sent
    waited = sf.when(sf.col("delivered_ns").isNull(), (sf.col("end_ns") - sent)) / 1e6
    return joined.select(
        "run_id",
        "queue_id",
        "send_op",
        sf.coalesce(sf.col("receive_op"), sf.lit(0)).alias("receive_op"),
        fate.alias("fate"),
        delivery.alias("delivery_ns"),
        waited.alias("waited_ms"),
    )


MERGED_BY = {
    "messages": sf.sum, "n": sf.sum, "total_ns": sf.sum, "squares_ns": sf.sum,
    "on_time": sf.sum, "min_waited_ms": sf.min, "max_waited_ms": sf.max, "late": sf.sum,
}  # fmt: skip
"""Each figure of ``aggregate`` and how the figures of several groups merge into one."""
AGGREGATE_COLUMNS = ("fate", "bucket", *MERGED_BY)


def aggregate(timed_rows: DataFrame, key_sets: Mapping[str, Sequence[str]]) -> DataFrame:
    """Every message, per grouping set, group, fate and bucket of delivery time (null
    but for delivered messages): the delivered messages' counts, exact sums and on-time
    counts (their histograms: ``histogram_cells``) and every fate's message counts and
    waits (``fate_rows``, from a set with run_id and queue_id).

    Two aggregations: one hash aggregation of the messages by every key at once (each
    message counted once), then the grouping sets over its rows (runs x queues x
    operation pairs x fates x buckets: few next to the messages), which costs far less
    than expanding every message into each set."""
    keys = list(dict.fromkeys(k for ks in key_sets.values() for k in ks))
    delivered = sf.col("fate") == DELIVERED
    delivery_ns = sf.when(delivered, sf.col("delivery_ns"))
    rows = timed_rows.select(
        *keys,
        "fate",
        delivery_ns.alias("delivery_ns"),
        sf.when(delivered, histograms_.bucket(delivery_ns / transforms.NS_PER_MS)).alias("bucket"),
        "waited_ms",
    )
    deadline_ns = DEADLINE_MS * transforms.NS_PER_MS
    finest = rows.groupBy(*keys, "fate", "bucket").agg(
        sf.count(sf.lit(1)).alias("messages"),
        sf.count("delivery_ns").alias("n"),
        *histograms_.sums(sf.col("delivery_ns")),
        sf.count(sf.when(sf.col("delivery_ns") <= deadline_ns, 1)).alias("on_time"),
        sf.min("waited_ms").alias("min_waited_ms"),
        sf.max("waited_ms").alias("max_waited_ms"),
        sf.count(sf.when(sf.col("waited_ms") > DEADLINE_MS, 1)).alias("late"),
    )
    merged = [merge(name).alias(name) for name, merge in MERGED_BY.items()]
    grouped = finest.groupingSets(
        [[*ks, "fate", "bucket"] for ks in key_sets.values()], *keys, "fate", "bucket"
    ).agg(*merged, sf.grouping_id().alias("_id"))
    with_fate = {name: [*ks, "fate"] for name, ks in key_sets.items()}
    names = histograms_.grouping_names([*keys, "fate"], with_fate)
    return grouped.select(names.alias("grouping_set"), *keys, *AGGREGATE_COLUMNS)


def histogram_cells(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The delivered messages' rows of ``aggregate``: histogram cells per grouping set."""
    return [dict(row) for row in rows if row["fate"] == DELIVERED]


FATE_COLUMNS = ("run_id", "queue_id", "fate", "messages", "min_waited_ms", "max_waited_ms", "late")


def fate_rows(rows: Iterable[Mapping[str, Any]], grouping_set: str) -> list[dict[str, Any]]:
    """Messages per run, queue and fate, from the rows of ``aggregate``'s set
    ``grouping_set`` (keyed by run_id and queue_id); for the backlog, how long they waited."""
    found: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        if row["grouping_set"] != grouping_set:
            continue
        key = (row["run_id"], row["queue_id"], row["fate"])
        cell = found.setdefault(key, {"messages": 0, "late": 0, "min": [], "max": []})
        cell["messages"] += int(row["messages"])
        cell["late"] += int(row["late"])
        for side in ("min", "max"):
            if row[f"{side}_waited_ms"] is not None:
                cell[side].append(row[f"{side}_waited_ms"])
    return [
        {
            "run_id": run_id,
            "queue_id": queue_id,
            "fate": fate,
            "messages": cell["messages"],
            "min_waited_ms": min(cell["min"], default=None),
            "max_waited_ms": max(cell["max"], default=None),
            "late": cell["late"],
        }
        for (run_id, queue_id, fate), cell in sorted(
            found.items(), key=lambda item: tuple(map(str, item[0]))
        )
    ]


SUMMARY_COLUMNS = (
    "n", "mean_ms", "std_ms", "ci_low", "ci_high",
    *(f"{name}{suffix}" for name in PERCENTILES for suffix in ("", "_low", "_high")),
    "within_5s",
)  # fmt: skip


def summary(histogram: histograms_.Histogram) -> dict[str, Any]:
    """n, mean with its t interval, percentiles with their intervals, share on time."""
    row: dict[str, Any] = dict.fromkeys(SUMMARY_COLUMNS)
    row["n"] = histogram.n
    moments = histogram.moments()
    if moments is None:
        return row
    row["mean_ms"], row["std_ms"] = moments.mean, moments.std
    row["ci_low"], row["ci_high"] = stats.t_interval(moments.mean, moments.std, moments.n)
    for name, p in PERCENTILES.items():
        row[name], row[f"{name}_low"], row[f"{name}_high"] = histogram.quantile(p)
    row["within_5s"] = histogram.on_time / histogram.n
    return row
