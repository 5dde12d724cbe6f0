"""Wake-up latency of a blocked RECEIVE across two middleware (printed, not asserted).

A reader waits in RECEIVE on server A; a writer sends through server B. The latency
is from the writer starting its send to the reader holding the message: the send's
commit, the NOTIFY to A, A's retried pop and the reply. Run: make bench.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import numpy as np
import pytest

import courier

# The integration tests' helper that runs `courier serve` processes.
from helpers.servers import ServerProcess

ROUNDS = 300
SETTLE = 0.01
"""Seconds between issuing the receive and sending, so the reader is surely waiting."""


@pytest.mark.benchmark
async def test_receive_wakeup_latency_across_two_middleware(dsn: str, tmp_path: Path) -> None:
    servers = [await ServerProcess(dsn, tmp_path).start() for _ in range(2)]
    try:
        latencies = await measure(*(f"127.0.0.1:{server.port}" for server in servers))
    finally:
        for server in servers:
            await server.stop()
    millis = np.array(latencies) * 1000
    p50, p90, p99 = np.percentile(millis, [50, 90, 99])
    print(
        f"\nreceive wake-up across two middleware, {ROUNDS} rounds: "
        f"p50 {p50:.2f} ms  p90 {p90:.2f} ms  p99 {p99:.2f} ms  max {millis.max():.2f} ms"
    )


async def measure(address_a: str, address_b: str) -> list[float]:
    async with courier.AsyncClient.connect(address_a) as setup:
        await setup.register("reader")
        await setup.register("writer")
        await setup.login(name="reader")
        await setup.create_queue("wakeup")
    latencies = []
    async with (
        courier.AsyncClient.connect(address_a, name="reader") as reader,
        courier.AsyncClient.connect(address_b, name="writer") as writer,
    ):
        for n in range(ROUNDS):
            waiting = asyncio.create_task(reader.receive("wakeup", timeout=10))
            await asyncio.sleep(SETTLE)
            started = time.perf_counter()
            await writer.send("wakeup", str(n))
            message = await waiting
            latencies.append(time.perf_counter() - started)
            assert message is not None and message.body == str(n).encode()
    return latencies
