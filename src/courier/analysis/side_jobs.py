"""Independent Spark queries on side threads, beside the driver's own work.

A query's driver side (analysing, planning, compiling its generated code) runs on
one core while the executors wait. Started from other threads, queries that do not
depend on each other keep both cores busy while the driver plans the next one.

    >>> with side_jobs.SideJobs(spark) as side:              # doctest: +SKIP
    ...     later = side.submit(delivery_results.compute, prepared)
    ...     counts = results.count_requests(prepared, 5.0)
    ...     delivered = later.result()

When the block ends by an exception, the side queries still running are
interrupted, so a failed or interrupted analysis does not wait for them.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from concurrent import futures
from types import TracebackType
from typing import Any, ParamSpec, TypeVar

from pyspark.sql import SparkSession

Params = ParamSpec("Params")
Result = TypeVar("Result")
WORKERS = 2
"""Side threads: a local[2] driver keeps both cores busy with two queries besides its own."""
INTERRUPT_EVERY_S = 0.2


class SideJobs:
    """A pool of side threads whose Spark jobs share one job tag, to cancel them by."""

    def __init__(self, spark: SparkSession, workers: int = WORKERS) -> None:
        self.spark = spark
        self.tag = f"courier-side-{uuid.uuid4().hex}"
        self.pool = futures.ThreadPoolExecutor(workers, thread_name_prefix="courier-side")
        self.started: list[futures.Future[Any]] = []

    def submit(
        self, work: Callable[Params, Result], *args: Params.args, **kwargs: Params.kwargs
    ) -> futures.Future[Result]:
        started = self.pool.submit(self._tagged, functools.partial(work, *args, **kwargs))
        self.started.append(started)
        return started

    def _tagged(self, work: Callable[[], Result]) -> Result:
        context = self.spark.sparkContext
        context.addJobTag(self.tag)  # a tag belongs to the thread that adds it
        try:
            return work()
        finally:
            context.removeJobTag(self.tag)

    def __enter__(self) -> SideJobs:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if error is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
            self._interrupt()
        self.pool.shutdown(wait=True)

    def _interrupt(self) -> None:
        # A side thread between two queries starts the next one after an
        # interrupt, so keep interrupting until every thread has stopped.
        while True:
            self.spark.sparkContext.cancelJobsWithTag(self.tag)
            _, running = futures.wait(self.started, timeout=INTERRUPT_EVERY_S)
            if not running:
                return
