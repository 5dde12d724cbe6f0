"""The session's Python workers: the interpreter that started the driver, with PySpark."""

from __future__ import annotations

import os
import sys

import pytest
from pyspark.sql import SparkSession

from courier.analysis import session


def test_python_workers_run_this_interpreter(spark: SparkSession) -> None:
    # Without the setting, Spark starts the first python3 on the PATH, which need
    # not be this venv's and need not have PySpark at all.
    ran = spark.sparkContext.parallelize([0], 1).map(lambda _: sys.executable).collect()
    assert ran == [sys.executable]


def test_a_session_names_this_interpreter_unless_told_otherwise(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The worker test above cannot fail where the venv's python3 is first on the PATH.
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    session.create("local[2]")  # joins the running session
    assert os.environ["PYSPARK_PYTHON"] == sys.executable
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/python-of-the-cluster/bin/python3")
    session.create("local[2]")
    assert os.environ["PYSPARK_PYTHON"] == "/opt/python-of-the-cluster/bin/python3"
