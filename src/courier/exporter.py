"""`courier exporter`: the database's view for Prometheus, from one place.

Queue depths and ages belong to the database, not to any one middleware, so one
exporter reads them for all: every ``interval`` seconds it runs the console's
bounded queue query (counts capped at ``count_cap``, at most ``max_queues`` queues)
and keeps the result; a scrape serves the last result and never touches the
database, so scrapes cost the database nothing however often they come.

    courier_queue_messages{queue}                    visible messages (capped)
    courier_queue_leased_messages{queue}             leased, not yet acknowledged
    courier_queue_delayed_messages{queue}            delayed, not yet due
    courier_queue_oldest_message_age_seconds{queue}  age of the oldest visible one
    courier_clients, courier_clients_online, courier_queues
    courier_exporter_last_refresh_timestamp_seconds  when the numbers were read
    courier_exporter_refresh_errors_total            reads that failed
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import asyncpg
import prometheus_client
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from courier.console import params, queries, rows, state
from courier.db import _translate

log = logging.getLogger(__name__)

PAGE = 500
"""Queues read per query."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What one refresh read."""

    queues: list[rows.QueueRow] = field(default_factory=list)
    counts: rows.Counts | None = None
    taken_at: float = 0.0  # unix time; 0: never


@dataclass(frozen=True, slots=True)
class ExporterSettings:
    interval: float = 15.0
    count_cap: int = 1_000_000
    max_queues: int = 10_000
    statement_timeout: float = 10.0


class DatabaseCollector(Collector):
    """Serves the last snapshot (read on the HTTP thread; replaced whole, never changed)."""

    def __init__(self) -> None:
        self.snapshot = Snapshot()
        self.errors = 0

    def collect(self) -> Iterator[Metric]:
        snapshot = self.snapshot
        yield from _queue_families(snapshot.queues)
        if snapshot.counts is not None:
            counts = snapshot.counts
            yield GaugeMetricFamily("courier_clients", "Registered clients.", counts.clients_total)
            yield GaugeMetricFamily(
                "courier_clients_online", "Clients logged in.", counts.clients_online
            )
            yield GaugeMetricFamily("courier_queues", "Queues.", counts.queues_total)
        yield GaugeMetricFamily(
            "courier_exporter_last_refresh_timestamp_seconds",
            "Unix time of the last successful read of the database (0: none yet).",
            snapshot.taken_at,
        )
        yield CounterMetricFamily(
            "courier_exporter_refresh_errors", "Reads of the database that failed.", self.errors
        )


def _queue_families(queues: list[rows.QueueRow]) -> Iterator[Metric]:
    described = {
        "messages": "Visible messages in the queue (counted up to the exporter's cap).",
        "leased_messages": "Messages leased and not yet acknowledged.",
        "delayed_messages": "Messages delayed and not yet due.",
        "oldest_message_age_seconds": "Age of the oldest visible message.",
    }
    families = {
        key: GaugeMetricFamily(f"courier_queue_{key}", text, labels=["queue"])
        for key, text in described.items()
    }
    for queue in queues:
        families["messages"].add_metric([queue.name], queue.messages)
        families["leased_messages"].add_metric([queue.name], queue.leased)
        families["delayed_messages"].add_metric([queue.name], queue.delayed)
        if queue.oldest_age_s is not None:
            families["oldest_message_age_seconds"].add_metric([queue.name], queue.oldest_age_s)
    yield from families.values()


async def read(pool: asyncpg.Pool, settings: ExporterSettings) -> Snapshot:
    """One bounded read: the counts, and the queues page by page up to ``max_queues``."""
    found: list[rows.QueueRow] = []
    after = 0
    while len(found) < settings.max_queues:
        limit = min(PAGE, settings.max_queues - len(found))
        page = await queries.queues(pool, "", params.Paging(after, limit), settings.count_cap)
        found += page.items
        if page.next_after is None:
            break
        after = page.next_after
    counts = await queries.counts(pool, settings.count_cap)
    return Snapshot(found, counts, time.time())


async def refresh_forever(
    pool: asyncpg.Pool, collector: DatabaseCollector, settings: ExporterSettings
) -> None:
    """Read the database every ``interval`` seconds; a failed read keeps the last
    numbers (their timestamp says how old they are) and counts an error."""
    while True:
        try:
            async with asyncio.timeout(settings.statement_timeout * 2):
                collector.snapshot = await read(pool, settings)
        except _translate.TRANSLATED as exc:  # an outage: try again next time
            collector.errors += 1
            log.warning("cannot read the database: %s", exc)
        await asyncio.sleep(settings.interval)


def run(dsn: str, host: str, port: int, settings: ExporterSettings) -> None:
    asyncio.run(serve(dsn, host, port, settings))


async def serve(dsn: str, host: str, port: int, settings: ExporterSettings) -> None:
    """Read and serve until SIGTERM or SIGINT."""
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    registry = prometheus_client.CollectorRegistry()
    collector = DatabaseCollector()
    registry.register(collector)
    pool = await open_pool(dsn, settings.statement_timeout)
    try:
        server, _ = prometheus_client.start_http_server(port, host, registry)
        log.info("Courier exporter on http://%s:%d/metrics", host, server.server_port)
        refreshing = loop.create_task(refresh_forever(pool, collector, settings))
        await stopping.wait()
        refreshing.cancel()
        server.shutdown()
        server.server_close()
    finally:
        await pool.close()


async def open_pool(dsn: str, statement_timeout: float) -> asyncpg.Pool:
    """One connection, with the console's planner settings (its queries, its plans)
    and a statement timeout; Unavailable when the database cannot be reached."""
    server_settings = state.SESSION_SETTINGS | {
        "statement_timeout": str(int(statement_timeout * 1000)),
        "application_name": "courier exporter",
    }
    try:
        pool: asyncpg.Pool = await asyncpg.create_pool(
            dsn, min_size=1, max_size=1, server_settings=server_settings
        )
    except _translate.TRANSLATED as exc:
        raise _translate.translate(exc) from exc
    return pool
