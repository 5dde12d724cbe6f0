"""Delivery times on a real middleware and database: a consumer that waits a known time.

A producer sends each message, a consumer waits a fixed time and then takes it
(alternately with RECEIVE and with a popping READ, from two queues), all recorded by
the lab's own client recorders. The pipeline must time every message at the wait
plus at most the two calls' own response times, list the messages sent but never
taken as backlog, and split the figures by queue and by operation pair.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from lab_helpers import quick_spec
from pyspark.sql import SparkSession

from courier.analysis import pipeline
from courier.client import AsyncClient
from courier.lab import process_recording, runner
from courier.measurements import manifest as manifest_
from courier.server import launcher

pytestmark = pytest.mark.slow

WAIT_S = 0.2
MESSAGES = 8
LEFT_WAITING = 3
MS = 1e6


async def produce_and_consume(address: str, run_dir: Path) -> list[tuple[int, int]]:
    """Every message sent, waited for and taken; returns (send start, take end) per message."""
    recording = process_recording.ProcessRecording.for_clients(run_dir, "r000", "load-0")
    async with AsyncClient.connect(address) as admin:
        await admin.register("producer")
        await admin.register("consumer")
    producer = await AsyncClient.connect(
        address, name="producer", recorder=recording.client_recorder("producer")
    )
    consumer = await AsyncClient.connect(
        address, name="consumer", recorder=recording.client_recorder("consumer")
    )
    observed = []
    try:
        queues = [await producer.create_queue(name) for name in ("even", "odd")]
        for n in range(MESSAGES):
            queue = queues[n % 2].id
            sent_at = time.time_ns()
            await producer.send(queue, f"message {n}")
            await asyncio.sleep(WAIT_S)
            if n % 2:
                message = await consumer.pop(queue)
            else:
                message = await consumer.receive(queue, timeout=1.0)
            assert message is not None
            observed.append((sent_at, time.time_ns()))
        for n in range(LEFT_WAITING):
            await producer.send(queues[0].id, f"never taken {n}")
    finally:
        await producer.close()
        await consumer.close()
        recording.close()
    return observed


async def test_delivery_time_is_the_consumers_wait(
    middleware: launcher.Middleware, tmp_path: Path, spark: SparkSession
) -> None:
    experiment = tmp_path / "delays"
    start_ns = time.time_ns()
    observed = await produce_and_consume(middleware.address, experiment / "r000")
    end_ns = time.time_ns() + 1
    run = manifest_.Run("r000", {}, start_ns=start_ns, end_ns=end_ns)
    manifest_.Manifest(manifest_.path_in(experiment), "delays", {}, (run,)).write()

    summary = pipeline.run(experiment, spark=spark)

    tables = summary.report_dir / "tables"
    (row,) = pq.read_table(tables / "delivery_runs.parquet").to_pylist()
    assert (row["sent"], row["delivered"], row["backlog"], row["unsent"]) == (
        MESSAGES + LEFT_WAITING, MESSAGES, LEFT_WAITING, 0,
    )  # fmt: skip
    longest_ms = max(end - sent for sent, end in observed) / MS
    # Each message waited WAIT_S in the queue; the rest is its two calls.
    # (A percentile is within half a 1% bucket of the order statistic.)
    assert row["p50"] * 1.01 >= WAIT_S * 1e3
    assert row["p99"] <= longest_ms * 1.01
    assert WAIT_S * 1e3 <= row["mean_ms"] <= longest_ms
    queues = pq.read_table(tables / "delivery_queues.parquet").to_pylist()
    assert sorted(q["n"] for q in queues) == [MESSAGES // 2, MESSAGES // 2]
    pairs = pq.read_table(tables / "delivery_pairs.parquet").to_pylist()
    assert {(p["send_op"], p["receive_op"], p["n"]) for p in pairs} == {
        ("send", "pop", MESSAGES // 2),
        ("send", "receive", MESSAGES // 2),
    }
    (waiting,) = pq.read_table(tables / "backlog.parquet").to_pylist()
    assert waiting["messages"] == LEFT_WAITING


async def test_delivery_time_rises_with_the_arrival_rate(
    dsn: str, tmp_path: Path, spark: SparkSession
) -> None:
    # The saturation spec's shape, shortened: open-loop producers and consumers at two
    # rates, three consumers to each producer. At the low rate consumers ask three
    # times as often as messages come, so most messages find a RECEIVE already waiting
    # (with as many receives as sends the queue would be a random walk, its times
    # anywhere from milliseconds to seconds). The high rate offers many times what the
    # middleware and the database can take on any box (each client keeps its 256
    # open-loop calls in flight), so the messages queue up. (At 2,000 a second a fast
    # machine kept up.)
    experiment = quick_spec(
        "rates", factors={"rate": [10, 8000]}, mix={"producer": 2, "consumer": 6},
        arrival="open", rate=10, queues=2, priorities=5, middleware=1, pool_size=4,
        duration_s=4.0, warmup_s=1.0, cooldown_s=0.5,
    )  # fmt: skip
    directory = await runner.run_experiment(experiment, runner.RunnerOptions(out=tmp_path, dsn=dsn))
    summary = pipeline.run(directory, spark=spark)

    levels = pq.read_table(summary.report_dir / "tables" / "delivery_levels.parquet").to_pylist()
    slow, fast = (next(r for r in levels if r["level"] == level) for level in ("10", "8000"))
    assert slow["n"] > 20 and fast["n"] > slow["n"]
    # (p50: a few dozen messages at the low rate leave its p90 to chance.)
    assert fast["p50"] > slow["p50"] and fast["mean_ms"] > slow["p50"]
    assert fast["p50_low"] > slow["p50_high"]  # the intervals do not even overlap
