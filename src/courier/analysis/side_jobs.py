"""Independent Spark queries on side threads, beside the driver's own work.

A query's driver side (analysing, planning, compiling its generated code) runs on
one core while the executors wait. Started from other threads, queries that do not
depend on each other keep both cores busy while the driver plans the next one.

    >>> with side_jobs.SideJobs(spark) as side:              # doctest: +SKIP
    ...     later = side.submit(delivery_results.compute, prepared)
    ...     counts = results.count_requests(prepared, 5.0)
    ...     delivered = later.result()

A side thread starts with the caller's Spark local properties and tags (its job
group, say), so whatever cancels the caller's jobs cancels the side jobs too. When
the block ends by an exception, the side jobs still running are cancelled, so a
failed or interrupted analysis does not wait for them; when it ends normally, a
side failure nobody asked for is raised then, not lost.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Callable
from concurrent import futures
from types import TracebackType
from typing import Any, ParamSpec, TypeVar

from pyspark.sql import SparkSession
from pyspark.util import inheritable_thread_target

log = logging.getLogger(__name__)

Params = ParamSpec("Params")
Result = TypeVar("Result")
WORKERS = 2
"""Side threads: a local[2] driver keeps both cores busy with two queries besides its own."""
CANCEL_EVERY_S = 0.2
"""How soon a side thread that was planning when the jobs were cancelled has its next
query cancelled too: far shorter than any query worth running on a side thread."""


class SideJobs:
    """A pool of side threads whose Spark jobs share one job tag, to cancel them by."""

    def __init__(self, spark: SparkSession, workers: int = WORKERS) -> None:
        self.spark = spark
        self.tag = f"courier-side-{uuid.uuid4().hex}"
        self.pool = futures.ThreadPoolExecutor(workers, thread_name_prefix="courier-side")
        self.submitted: list[futures.Future[Any]] = []

    def submit(
        self, work: Callable[Params, Result], *args: Params.args, **kwargs: Params.kwargs
    ) -> futures.Future[Result]:
        """Run ``work(*args, **kwargs)`` on a side thread; its jobs carry the tag."""
        inheriting = inheritable_thread_target(self.spark)(self._tagged)
        future = self.pool.submit(inheriting, functools.partial(work, *args, **kwargs))
        self.submitted.append(future)
        return future

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
            self._cancel_until_stopped()
        self.pool.shutdown(wait=True)
        if error is None:
            for future in self.submitted:
                future.result()

    def _cancel_until_stopped(self) -> None:
        # A side thread between two queries starts the next one after a cancel, so
        # keep cancelling until every thread has stopped.
        cancelling = True
        while True:
            if cancelling:
                cancelling = self._cancel()
            _, running = futures.wait(self.submitted, timeout=CANCEL_EVERY_S)
            if not running:
                return

    def _cancel(self) -> bool:
        """Cancel the tagged jobs; False when Spark cannot be asked any more."""
        try:
            self.spark.sparkContext.cancelJobsWithTag(self.tag)
        except Exception:  # the gateway or the context is gone: so are the jobs
            log.warning("could not cancel the side jobs tagged %s", self.tag, exc_info=True)
            return False
        return True
