"""The supply-chain benchmark from real records: real middleware, database and Spark.

Two short runs of ``experiments/supply-smoke.toml`` at BASE 1: as shipped, through
``courier lab bench`` (every backlog stable, every interaction's p90 well under 5 s:
valid), and with nobody taking the sales statistics at headquarters, whose queue
then grows by the rate the supermarkets send them, so the run is invalid on both
counts: that queue's backlog grows and interaction 5 misses its 5 s.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from courier.analysis import benchmark
from courier.cli import main
from courier.lab import runner
from courier.lab.supply import bench, kinds, mix, topology
from courier.measurements import destinations

pytestmark = pytest.mark.slow

SMOKE = Path(__file__).parents[3] / "experiments" / "supply-smoke.toml"


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory, spark: SparkSession) -> tuple[str, Path]:
    """``courier lab bench`` on the smoke spec: its output and experiment directory."""
    out = tmp_path_factory.mktemp("supply")
    result = CliRunner().invoke(main.cli, ["lab", "bench", str(SMOKE), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return result.output, out / "supply-smoke-horizontal"


@pytest.fixture(scope="module")
def starved(tmp_path_factory: pytest.TempPathFactory, spark: SparkSession) -> benchmark.Judgement:
    """The smoke spec with no handler for statInfoSM, judged."""
    smoke = topology.load(SMOKE)
    spec = dataclasses.replace(smoke, name="starved", handlers={**smoke.handlers, "statInfoSM": 0})
    options = runner.RunnerOptions(out=tmp_path_factory.mktemp("starved"))

    async def run_it() -> Path:
        async with bench.BenchExperiment(spec, "horizontal", options, planned_runs=1) as ran:
            await ran.run(1)
        return ran.directory

    return benchmark.judge(spark, asyncio.run(run_it()))


def rows(directory: Path, table: str) -> list[dict[str, object]]:
    return pq.read_table(directory / "benchmark" / f"{table}.parquet").to_pylist()


def test_the_smoke_run_is_valid_on_every_interaction_and_queue(
    smoke_run: tuple[str, Path],
) -> None:
    output, directory = smoke_run
    assert "r000 BASE 1: valid" in output
    interactions = rows(directory, "interactions")
    assert [row["interaction"] for row in interactions] == list(range(1, 8))
    for row in interactions:
        assert row["delivered"] > 0 and row["ok"] is True
        assert row["p90_ms"] < 5_000 and row["on_time_share"] >= 0.9
    queues = rows(directory, "queues")
    run_map = destinations.read(directory / "r000")
    assert len(queues) == len(run_map)  # every queue and subscription is judged
    assert all(row["stable"] is True for row in queues)
    assert {row["kind"] for row in queues} == set(kinds.KINDS)


def test_the_smoke_run_carries_the_planned_message_kinds(smoke_run: tuple[str, Path]) -> None:
    _, directory = smoke_run
    run_map = destinations.read(directory / "r000")
    subscriptions = [q for q in run_map.values() if ":" in q["name"]]
    plan = topology.load(SMOKE).plan()
    # per supermarket 3 subscriptions, per supplier 2 product families
    assert len(subscriptions) == 3 * plan.locations["sm"] + 2 * plan.locations["sp"]
    assert mix.of(plan).total > 0


def test_the_evidence_says_which_kinds_ran_persistent(smoke_run: tuple[str, Path]) -> None:
    output, directory = smoke_run
    for row in rows(directory, "kinds"):
        kind = kinds.KINDS[str(row["kind"])]
        assert row["persistent"] is kind.persistent
        assert row["ran_persistent"] is kind.persistent
    assert "non-persistent kinds ran persistent" not in " ".join(output.split())


def test_a_queue_nobody_takes_grows_and_fails_the_run(starved: benchmark.Judgement) -> None:
    assert starved.verdicts["r000"].valid is False
    growing = [row for row in starved.queues.records() if row["stable"] is False]
    assert [row["queue"] for row in growing] == ["hq-000.statInfoSM"]
    plan = topology.load(SMOKE).plan()
    sent_per_s = plan.rates["sales_stats"] * plan.locations["sm"]
    # it grows by what the supermarkets send (Poisson arrivals: within half of it)
    assert 0.5 * sent_per_s <= growing[0]["slope_per_s"] <= 1.5 * sent_per_s
    failing = [row for row in starved.interactions.records() if row["ok"] is False]
    assert [row["interaction"] for row in failing] == [5]
    assert failing[0]["late_backlog"] > 0
    text = " ".join(starved.verdicts["r000"].failing)
    assert "hq-000.statInfoSM" in text and "interaction 5" in text
