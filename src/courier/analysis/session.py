"""A quiet Spark session for the pipeline: no UI, few shuffle partitions, WARN+ only."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from pyspark.sql import SparkSession

from courier.analysis import class_archive

DEFAULT_MASTER = "local[*]"
DEFAULT_DRIVER_MEMORY = "2g"
SHUFFLE_PARTITIONS = 8
JVM_OPTIONS = ("-XX:+UseParallelGC", "-XX:InlineSmallCode=1000", "-XX:FreqInlineSize=150")
"""A fresh JVM spends nearly as much CPU compiling (Spark's generated code, then
the JIT) as running the first analysis; smaller inlining budgets cut that by a
third, and the throughput collector costs less CPU than G1 for these short-lived
rows. For the driver (the whole JVM in local mode) and a cluster's executors.
Measured in docs/measurements.md ("Pipeline speed")."""

# Without a log4j2 file Spark logs INFO lines and prints a "default log level"
# banner before the session exists; the banner stays away only while the root
# level is WARN, so the noisy startup warnings are silenced by logger name instead.
_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.hadoop.name = org.apache.hadoop.util.NativeCodeLoader
logger.hadoop.level = error
logger.utils.name = org.apache.spark.util.Utils
logger.utils.level = error
"""


def _log_config() -> Path:
    path = Path(tempfile.gettempdir()) / "courier-spark-log4j2.properties"
    if not path.is_file() or path.read_text() != _LOG4J2:
        path.write_text(_LOG4J2)
    return path


def create(
    master: str = DEFAULT_MASTER,
    *,
    app_name: str = "courier-analysis",
    driver_memory: str = DEFAULT_DRIVER_MEMORY,
    driver_options: Sequence[str] = (),
    map_class_archive: bool = True,
) -> SparkSession:
    """Start (or join) a Spark session configured for small aggregate-heavy jobs.

    ``driver_options`` go to the driver JVM after ``JVM_OPTIONS``. The driver maps
    the class archive ``make`` built for this install, if there is one and
    ``map_class_archive`` (``courier.analysis.class_archive``).
    """
    # PySpark reads its workers' Python from the environment only, and otherwise
    # runs the first python3 on the PATH, which need not have PySpark. On local[*]
    # the pipeline starts no worker; on a cluster its visibility probe does, which is
    # why every worker needs this Python at the same path (or PYSPARK_PYTHON set).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    archive = class_archive.driver_options(JVM_OPTIONS) if map_class_archive else ()
    options = " ".join(
        (
            f"-Dlog4j2.configurationFile=file:{_log_config()}",
            *JVM_OPTIONS,
            *archive,
            *driver_options,
        )
    )
    spark = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", driver_memory)
        .config("spark.driver.extraJavaOptions", options)
        .config("spark.executor.extraJavaOptions", " ".join(JVM_OPTIONS))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@contextlib.contextmanager
def opened(master: str = DEFAULT_MASTER) -> Iterator[SparkSession]:
    """A session for one pipeline run; stopped afterwards only if this call started it."""
    existing = SparkSession.getActiveSession()
    spark = existing or create(master)
    try:
        yield spark
    finally:
        if existing is None:
            spark.stop()
