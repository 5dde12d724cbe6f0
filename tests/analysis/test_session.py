"""The session's Python workers: the interpreter that started the driver, with PySpark."""

from __future__ import annotations

import sys

from pyspark.sql import SparkSession


def test_python_workers_run_this_interpreter(spark: SparkSession) -> None:
    # Without the setting, Spark starts the first python3 on the PATH, which need
    # not be this venv's and need not have PySpark at all.
    ran = spark.sparkContext.parallelize([0], 1).map(lambda _: sys.executable).collect()
    assert ran == [sys.executable]
