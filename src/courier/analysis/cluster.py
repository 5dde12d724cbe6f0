"""Running the pipeline on a Spark cluster: the experiment must be where the workers look.

The driver reads the manifest and checks every record file itself, then hands the
files' paths to Spark; on a cluster the executors open them, so the experiment
directory must be visible to every worker at the same path (a shared file system
such as NFS, or object storage mounted at the same path). ``check_visible`` asks
each executor before any work starts, so a missing mount is one clear error
instead of a failed task deep inside the first aggregation.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from pyspark.sql import SparkSession

from courier.analysis import errors
from courier.measurements import manifest as manifest_

PROBES_PER_SLOT = 2
"""Probe tasks per executor core: enough that every executor runs at least one."""


def is_local(master: str) -> bool:
    return master.startswith("local")


def check_visible(spark: SparkSession, experiment_dir: Path) -> None:
    """Raise ExperimentError unless every executor sees the experiment's manifest."""
    context = spark.sparkContext
    if is_local(context.master or ""):
        return
    manifest_path = str(manifest_.path_in(Path(experiment_dir).resolve()))
    tasks = max(context.defaultParallelism, 1) * PROBES_PER_SLOT

    def probe(_: int) -> tuple[str, bool]:
        return socket.gethostname(), os.path.isfile(manifest_path)

    try:
        seen = context.parallelize(range(tasks), tasks).map(probe).distinct().collect()
    except Exception as exc:  # py4j reports the failed probe task
        raise errors.ExperimentError(
            f"the Spark workers at {context.master} could not run a probe task "
            f"(is the same Python, with Courier installed, on every worker?): {exc}"
        ) from exc
    blind = sorted({host for host, visible in seen if not visible})
    if blind:
        raise errors.ExperimentError(
            f"{manifest_path} is not visible to the Spark workers on {', '.join(blind)}: "
            "every worker must see the experiment directory at the same path as the "
            "driver (a shared file system, or object storage mounted at that path)"
        )
