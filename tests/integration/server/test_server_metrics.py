"""Prometheus metrics: a middleware's /metrics counts exactly the requests a real load
made, and `courier exporter` reports the queue depth the database holds."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

import courier
from helpers.servers import (
    COURIER,
    ServerProcess,
    StartServer,
    address,
    environment_without_settings,
    free_port,
)

SENDS = 40
"""Messages the load sends, then pops one by one (half of them concurrently)."""


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of http://127.0.0.1:port/metrics, by name and sorted labels."""
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str,
          **labels: str) -> float | None:  # fmt: skip
    return samples.get((name, tuple(sorted(labels.items()))))


@pytest.fixture
async def metered(start_server: StartServer) -> tuple[ServerProcess, int]:
    port = free_port()
    return await start_server(metrics_port=port), port


async def test_request_counters_equal_the_requests_made(
    metered: tuple[ServerProcess, int],
) -> None:
    server, port = metered
    async with courier.AsyncClient.connect(address(server)) as setup:
        await setup.register("metered")
    async with courier.AsyncClient.connect(address(server), name="metered") as client:
        await client.create_queue("metered-q")
        await asyncio.gather(*(client.send("metered-q", f"m{n}") for n in range(SENDS)))
        for _ in range(SENDS // 2):
            assert await client.pop("metered-q") is not None
        popped = await asyncio.gather(*(client.pop("metered-q") for _ in range(SENDS // 2)))
        assert all(message is not None for message in popped)
        assert await client.pop("metered-q") is None  # one QUEUE_EMPTY
        live = await asyncio.to_thread(scrape, port)
    samples = await asyncio.to_thread(scrape, port)

    assert value(samples, "courier_requests_total", operation="send", status="OK") == SENDS
    assert value(samples, "courier_requests_total", operation="read", status="OK") == SENDS
    assert value(samples, "courier_requests_total", operation="read", status="QUEUE_EMPTY") == 1
    assert value(samples, "courier_requests_total", operation="create_queue", status="OK") == 1
    assert value(samples, "courier_request_duration_seconds_count", operation="send") == SENDS
    assert value(samples, "courier_request_duration_seconds_count", operation="read") == SENDS + 1
    # The one PING is the anonymous client's greeting; the launcher's readiness
    # probes (request id 0) are no part of the load and are not counted.
    assert value(samples, "courier_requests_total", operation="ping", status="OK") == 1
    # The create, every send and every pop went through the batcher: its calls
    # carried exactly them.
    assert value(samples, "courier_db_batch_requests_sum", batcher="single") == 2 * SENDS + 2
    calls = value(samples, "courier_db_batch_requests_count", batcher="single")
    assert calls is not None and calls <= 2 * SENDS + 2
    # While the client was connected and logged in, the gauges said so.
    assert value(live, "courier_connections") == 1
    assert value(live, "courier_sessions") == 1
    assert value(samples, "courier_sessions") == 0
    assert value(samples, "courier_db_pool_connections", state="max") == 10


async def test_a_lease_that_runs_out_is_counted_as_returned(
    metered: tuple[ServerProcess, int],
) -> None:
    server, port = metered
    async with courier.AsyncClient.connect(address(server)) as setup:
        await setup.register("forgetful")
    async with courier.AsyncClient.connect(address(server), name="forgetful") as client:
        await client.create_queue("leases")
        await client.send("leases", "take me twice")
        assert await client.receive("leases", timeout=5, lease=0.2) is not None  # never acked
        deadline = time.monotonic() + 10
        while (again := await client.pop("leases")) is None:
            assert time.monotonic() < deadline, "the lease never ran out"
            await asyncio.sleep(0.05)
        assert again.body == b"take me twice"
    samples = await asyncio.to_thread(scrape, port)
    assert value(samples, "courier_returned_messages_total") == 1
    assert value(samples, "courier_expired_messages_total") == 0


@pytest.fixture
def exporter(dsn: str, tmp_path: Path) -> Iterator[int]:
    port = free_port()
    command = [str(COURIER), "exporter", "--port", str(port), "--interval", "0.2"]
    env = environment_without_settings() | {"COURIER_DSN": dsn}
    log = tmp_path / "exporter.log"
    with log.open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=output, env=env)
    try:
        deadline = time.monotonic() + 30
        while not serves(port):
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        yield port
    finally:
        process.terminate()
        assert process.wait(15) == 0, log.read_text()


def serves(port: int) -> bool:
    try:
        return "courier_exporter" in httpx.get(f"http://127.0.0.1:{port}/metrics").text
    except httpx.TransportError:
        return False


async def test_the_exporter_reports_queue_depths(server: ServerProcess, exporter: int) -> None:
    async with courier.AsyncClient.connect(address(server)) as setup:
        await setup.register("depth-maker")
    async with courier.AsyncClient.connect(address(server), name="depth-maker") as client:
        await client.create_queue("depth-q")
        await client.create_queue("empty-q")
        for n in range(7):
            await client.send("depth-q", f"m{n}")
        leased = await client.receive("depth-q", timeout=5, lease=60)
        assert leased is not None
        samples = await until_reported(exporter, "depth-q", 6, leased=1)
    assert value(samples, "courier_queue_messages", queue="empty-q") == 0
    age = value(samples, "courier_queue_oldest_message_age_seconds", queue="depth-q")
    assert age is not None and 0 <= age < 60
    assert value(samples, "courier_queue_oldest_message_age_seconds", queue="empty-q") is None
    assert value(samples, "courier_queues") == 2
    refreshed = value(samples, "courier_exporter_last_refresh_timestamp_seconds")
    assert refreshed is not None and abs(refreshed - time.time()) < 30


async def until_reported(
    port: int, queue: str, depth: int, leased: int = 0
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Scrape until the queue shows ``depth`` visible and ``leased`` leased messages.

    The exporter reads the database every 0.2 s (and starts up first), so a scrape
    can show an earlier state: after six of seven sends, six visible and none
    leased, just like after the seventh send and a lease."""
    deadline = time.monotonic() + 20
    while True:
        try:
            samples = await asyncio.to_thread(scrape, port)
        except httpx.TransportError:
            samples = {}
        if value(samples, "courier_queue_messages", queue=queue) == depth and (
            value(samples, "courier_queue_leased_messages", queue=queue) == leased
        ):
            return samples
        assert time.monotonic() < deadline, samples
        await asyncio.sleep(0.1)
