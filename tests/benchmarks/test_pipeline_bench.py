"""Pipeline throughput: records analysed per second on 10M generated requests.

Not part of `make test`. Run with
    .venv/bin/pytest tests/benchmarks/test_pipeline_bench.py -s
It writes 10M client request records (and their 10M server records) across two
runs with ``courier.analysis.synthetic`` in 1M-row chunks, then runs the whole
pipeline on local[2] twice, in a fresh JVM and again in the same one, and prints
the time of each step and records per second of each.
Set COURIER_BENCH_REQUESTS to change the number of requests.
"""

from __future__ import annotations

import importlib
import itertools
import os
import shutil
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from courier.analysis import pipeline, session, synthetic

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REQUESTS = int(os.environ.get("COURIER_BENCH_REQUESTS", "10000000"))
RUNS = 2


@pytest.fixture(scope="module")
def experiment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    began = time.perf_counter()
    root = synthetic.write_experiment(
        tmp_path_factory.mktemp("bench") / "big",
        factors={"clients": [1, 8]},
        requests_per_run=REQUESTS // RUNS,
        duration_s=600.0,
        warmup_s=30.0,
        cooldown_s=30.0,
        chunk_rows=1_000_000,
    )
    print(f"\ngenerated {REQUESTS:,} requests in {time.perf_counter() - began:.1f} s")
    yield root
    shutil.rmtree(root)  # about 60 MB per million requests


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    with warnings.catch_warnings():  # PySpark warns once that pandas 3 is untested
        warnings.simplefilter("ignore", FutureWarning)
        importlib.import_module("pyspark.testing.utils")
    spark = session.create("local[2]")
    yield spark
    spark.stop()


@pytest.mark.benchmark
@pytest.mark.timeout(1800)  # minutes on a busy 2-core box, beyond the suite's 300 s
def test_pipeline_records_per_second(experiment: Path, spark: SparkSession) -> None:
    for label in RUNS_OF_THE_PIPELINE:
        summary = timed_pipeline(experiment, spark, label)
        assert sum(run["requests"] for run in summary.runs) > 0


RUNS_OF_THE_PIPELINE = ("fresh JVM (JIT warm-up included)", "same JVM again (warm)")
"""The first run pays for compiling Spark's generated code and the JIT; the second
shows the rate of a session that has analysed before (the console, a notebook)."""


def timed_pipeline(experiment: Path, spark: SparkSession, label: str) -> pipeline.Summary:
    marks: list[tuple[str, float]] = []

    def progress(description: str, done: int, total: int) -> None:
        marks.append((description, time.perf_counter()))

    summary = pipeline.run(experiment, spark=spark, progress=progress)
    print(f"\n{label}\n{'step':<42}{'seconds':>10}")
    for (step, began), (_, ended) in itertools.pairwise(marks):
        print(f"{step:<42}{ended - began:>10.1f}")
    print(
        f"{summary.records:,} records ({REQUESTS:,} client requests) in "
        f"{summary.elapsed_s:.1f} s: {summary.records_per_second:,.0f} records/s, "
        f"{REQUESTS / summary.elapsed_s:,.0f} client requests/s"
    )
    return summary
