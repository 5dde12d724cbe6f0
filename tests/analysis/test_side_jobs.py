"""Side queries on a real Spark session: results come back, failures stop them."""

from __future__ import annotations

import threading
import time

import pytest
from pyspark.sql import SparkSession

from courier.analysis import side_jobs

ENDLESS_ROWS = 1 << 42
"""A count over this many rows runs for hours on two cores: only an interrupt ends it."""


def endless_count(spark: SparkSession) -> int:
    return spark.range(ENDLESS_ROWS, numPartitions=2).where("id % 7 = 3").count()


def test_a_side_query_answers_on_its_own_thread(spark: SparkSession) -> None:
    def total_and_thread() -> tuple[int, str]:
        total = spark.range(1_000).selectExpr("sum(id)").first()[0]
        return int(total), threading.current_thread().name

    with side_jobs.SideJobs(spark) as side:
        later = side.submit(total_and_thread)
        here = spark.range(10).count()
    total, thread = later.result()
    assert (total, here) == (sum(range(1_000)), 10)
    assert thread != threading.current_thread().name


def test_a_failing_block_interrupts_its_running_side_query(spark: SparkSession) -> None:
    began = time.monotonic()
    with pytest.raises(LookupError), side_jobs.SideJobs(spark) as side:
        later = side.submit(endless_count, spark)
        _wait_until_running(spark)
        raise LookupError("the main thread's own step failed")
    assert time.monotonic() - began < 60
    with pytest.raises(Exception, match="SPARK_JOB_CANCELLED"):
        later.result()


def test_a_query_started_after_the_interrupt_is_interrupted_too(spark: SparkSession) -> None:
    attempts: list[str] = []

    def retrying() -> None:  # like a thread that was planning its next query
        for attempt in range(2):
            try:
                endless_count(spark)
            except Exception as error:  # py4j's error, whatever its class
                assert "SPARK_JOB_CANCELLED" in str(error)
                attempts.append(f"attempt {attempt} interrupted")

    began = time.monotonic()
    with pytest.raises(LookupError), side_jobs.SideJobs(spark) as side:
        side.submit(retrying)
        _wait_until_running(spark)
        raise LookupError("the main thread's own step failed")
    assert time.monotonic() - began < 60
    assert attempts == ["attempt 0 interrupted", "attempt 1 interrupted"]


def _wait_until_running(spark: SparkSession) -> None:
    tracker = spark.sparkContext.statusTracker()
    deadline = time.monotonic() + 30
    while not tracker.getActiveJobsIds():
        assert time.monotonic() < deadline, "the side query never started"
        time.sleep(0.05)
