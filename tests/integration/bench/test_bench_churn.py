"""`courier bench churn` at tiny scale: 4 clients, two 2-second intervals, real processes.

One run on a fresh durable embedded PostgreSQL through two middleware, checked
through its JSON, its plot and its table.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from helpers.servers import COURIER, environment_without_settings

pytestmark = pytest.mark.slow

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    where = tmp_path_factory.mktemp("churn")
    result = subprocess.run(
        [str(COURIER), "bench", "churn", "--duration", "4", "--interval", "2", "--clients", "4",
         "--warmup", "0.5", "--json", "out.json", "--plot", "out.png"],
        cwd=where, env=environment_without_settings(), capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    document = json.loads((where / "out.json").read_text())
    return {"result": result, "document": document, "plot": where / "out.png"}


def ordered(latency: dict[str, float]) -> bool:
    return 0 < latency["p50_ms"] <= latency["p90_ms"] <= latency["p99_ms"]


def test_every_interval_did_work_with_ordered_percentiles(run: dict[str, Any]) -> None:
    found = run["document"]["intervals"]
    assert [(i["start_s"], i["end_s"]) for i in found] == [(0.0, 2.0), (2.0, 4.0)]
    for interval in found:
        assert interval["sends"] > 0 and interval["pops"] > 0, interval
        assert interval["ops_per_s"] == pytest.approx(interval["operations"] / 2.0)
        for name in ("latency", "send_latency", "pop_latency"):
            assert ordered(interval[name]), (name, interval)


def test_the_intervals_add_up_to_the_whole_window(run: dict[str, Any]) -> None:
    totals = run["document"]["totals"]
    assert totals["errors"] == 0, totals["last_error"]
    intervals = run["document"]["intervals"]
    assert sum(i["operations"] for i in intervals) == totals["operations"]


def test_the_table_is_sampled_at_the_start_and_after_every_interval(run: dict[str, Any]) -> None:
    samples = run["document"]["samples"]
    assert len(samples) == 3
    instants = [sample["at_s"] for sample in samples]
    assert instants == sorted(instants) and instants[0] >= 0
    assert [i["table"] for i in run["document"]["intervals"]] == samples[1:]
    for sample in samples:
        assert sample["total_bytes"] > 0
        assert sample["dead_rows"] >= 0 and sample["live_rows"] >= 0


def test_the_verdict_is_printed_and_kept(run: dict[str, Any]) -> None:
    verdict = run["document"]["verdict"]
    first, last = (i["ops_per_s"] for i in run["document"]["intervals"])
    assert verdict["throughput_ratio"] == pytest.approx(last / first)
    assert verdict["most_dead_rows"] == max(s["dead_rows"] for s in run["document"]["samples"])
    out = run["result"].stdout
    assert "of the first (needs >= 90%)" in out
    assert f"dead rows stayed at most {verdict['most_dead_rows']:,}" in out
    assert "churn: 4 clients, 2 middleware, 2 s intervals" in out


def test_the_plot_is_a_png(run: dict[str, Any]) -> None:
    assert run["plot"].read_bytes()[:8] == PNG_SIGNATURE
