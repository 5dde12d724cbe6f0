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


def test_a_side_query_answers_on_a_side_thread_with_its_tag(spark: SparkSession) -> None:
    def total_thread_and_tags() -> tuple[int, str, set[str]]:
        total = spark.range(1_000).selectExpr("sum(id)").first()[0]
        tags = set(spark.sparkContext.getJobTags())
        return int(total), threading.current_thread().name, tags

    with side_jobs.SideJobs(spark) as side:
        later = side.submit(total_thread_and_tags)
        here = spark.range(10).count()
    total, thread, tags = later.result()
    assert (total, here) == (sum(range(1_000)), 10)
    assert thread.startswith("courier-side")
    assert tags == {side.tag}
    assert set(spark.sparkContext.getJobTags()) == set()  # the caller's thread keeps none


def test_cancelling_the_callers_jobs_cancels_the_side_jobs(spark: SparkSession) -> None:
    # Side threads inherit the caller's tags (and job group): whoever stops the
    # caller's analysis stops its side queries as well.
    context = spark.sparkContext
    context.addJobTag("the-callers-analysis")
    try:
        with (
            pytest.raises(Exception, match="SPARK_JOB_CANCELLED"),
            side_jobs.SideJobs(spark) as side,
        ):
            side.submit(endless_count, spark)
            _wait_until_running(spark)
            context.cancelJobsWithTag("the-callers-analysis")
    finally:
        context.removeJobTag("the-callers-analysis")


def test_a_side_failure_nobody_read_is_raised_when_the_block_ends(
    spark: SparkSession,
) -> None:
    def failing() -> None:
        raise LookupError("a side step failed")

    with pytest.raises(LookupError, match="a side step failed"), side_jobs.SideJobs(spark) as side:
        side.submit(failing)


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
