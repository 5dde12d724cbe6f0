"""Prometheus metrics of one middleware, served over HTTP on a port of their own.

Each middleware counts its own requests; queue depths are the database's business
and come from `courier exporter` instead (one place, not N middleware).

    courier_requests_total{operation, status}        requests answered
    courier_request_duration_seconds{operation}      arrival to reply written
    courier_connections, courier_sessions            open / logged in now
    courier_db_pool_connections{state}               in_use, idle, max
    courier_db_batch_requests{batcher}               requests per database call
    courier_returned_messages_total                  held messages this instance's
                                                     sweeper made visible again (a
                                                     lease that ran out: a redelivery;
                                                     or a delay that ended)
    courier_expired_messages_total                   messages its sweeper expired (ttl)

The data path pays one dict lookup, one counter increment and one histogram
observation per request: the labelled children are resolved once per
(operation, status) and kept. Everything else is read when Prometheus scrapes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from wsgiref.simple_server import WSGIServer

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from courier.db import repository
from courier.protocol import names

log = logging.getLogger(__name__)

LATENCY_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip
"""Seconds: a pop answered from memory takes ~100 µs; a receive may wait minutes."""
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class Metrics:
    """The metrics of one middleware, in a registry of its own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._requests = Counter(
            "courier_requests", "Requests answered, by operation and the status sent.",
            ["operation", "status"], registry=self.registry,
        )  # fmt: skip
        self._latency = Histogram(
            "courier_request_duration_seconds",
            "From a request's arrival to its reply being written, by operation.",
            ["operation"], buckets=LATENCY_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self._batches = Histogram(
            "courier_db_batch_requests", "Requests carried by one database call, by batcher.",
            ["batcher"], buckets=BATCH_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self._children: dict[tuple[int, int], tuple[Counter, Histogram]] = {}

    def answered(self, opcode: int, status: int, seconds: float) -> None:
        """One request answered (the data path's only call)."""
        children = self._children.get((opcode, status))
        if children is None:
            children = self._resolve(opcode, status)
        children[0].inc()
        children[1].observe(seconds)

    def _resolve(self, opcode: int, status: int) -> tuple[Counter, Histogram]:
        operation = names.OPERATIONS[opcode]
        children = (
            self._requests.labels(operation, names.STATUSES[status]),
            self._latency.labels(operation),
        )
        self._children[opcode, status] = children
        return children

    def sweep_observer(self) -> Callable[[repository.Sweep], None]:
        """What the sweeper calls with what each sweep did."""
        returned = Counter(
            "courier_returned_messages",
            "Held messages made visible again by this instance's sweeper: leases that"
            " ran out (redeliveries follow) and delays that ended.",
            registry=self.registry,
        )
        expired = Counter(
            "courier_expired_messages", "Messages this instance's sweeper expired (ttl).",
            registry=self.registry,
        )  # fmt: skip

        def observe(done: repository.Sweep) -> None:
            returned.inc(done.returned)
            expired.inc(done.expired)

        return observe

    def batch_observer(self, batcher: str) -> Callable[[int], None]:
        """What a batcher calls with the size of each database call it makes."""
        return self._batches.labels(batcher).observe

    def watch_connections(self, open_now: Callable[[], int], logged_in: Callable[[], int]) -> None:
        gauge("courier_connections", "Client connections open.", open_now, self.registry)
        gauge("courier_sessions", "Client connections logged in.", logged_in, self.registry)

    def watch_pool(self, in_use: Callable[[], int], idle: Callable[[], int], most: int) -> None:
        pool = Gauge(
            "courier_db_pool_connections", "The database connection pool, by state.",
            ["state"], registry=self.registry,
        )  # fmt: skip
        pool.labels("in_use").set_function(in_use)
        pool.labels("idle").set_function(idle)
        pool.labels("max").set(most)

    def serve(self, host: str, port: int) -> MetricsEndpoint:
        """Serve /metrics on host:port (0 picks a free port) from a thread of its own."""
        server, thread = prometheus_client.start_http_server(port, host, self.registry)
        return MetricsEndpoint(server, thread, host)


def gauge(name: str, text: str, read: Callable[[], int], registry: CollectorRegistry) -> None:
    """A gauge whose value is read when Prometheus scrapes, not kept up to date."""
    Gauge(name, text, registry=registry).set_function(read)


class MetricsEndpoint:
    """A running /metrics endpoint."""

    def __init__(self, server: WSGIServer, thread: threading.Thread, host: str) -> None:
        self._server = server
        self._thread = thread
        self.port = server.server_port
        self.address = f"{host}:{self.port}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
