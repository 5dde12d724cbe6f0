"""`courier bench standard`, briefly: 4 clients for 2 measured seconds through the lab."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from helpers.servers import COURIER, environment_without_settings

pytestmark = pytest.mark.slow

CYCLE_OPERATIONS = {"send", "peek", "pop", "create_queue", "queues_for_me", "delete_queue"}


def test_the_standard_cycle_is_summed_up(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(COURIER), "bench", "standard", "--clients", "4", "--duration", "2",
         "--warmup", "0.5", "--json", "out.json"],
        cwd=tmp_path, env=environment_without_settings(), capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "standard cycle: 4 clients, 2 middleware" in result.stdout
    document = json.loads((tmp_path / "out.json").read_text())
    summaries = {summary["operation"]: summary for summary in document["results"]}
    assert set(summaries) == {"all", *CYCLE_OPERATIONS}
    overall = summaries.pop("all")
    assert overall["requests"] == sum(summary["requests"] for summary in summaries.values())
    assert overall["requests_per_s"] == pytest.approx(overall["requests"] / 2.0)
    for name, summary in {"all": overall, **summaries}.items():
        latency = summary["latency"]
        assert 0 < latency["p50_ms"] <= latency["p90_ms"] <= latency["p99_ms"], name
    # A cycle sends 3 messages and reads 6 times (3 peeks, 3 pops); the measured
    # interval cuts cycles at both ends, so allow a few per client.
    for read in ("peek", "pop"):
        assert abs(summaries[read]["requests"] - summaries["send"]["requests"]) <= 4 * 3
    assert document["statuses"].get("OK", 0) > 0
    pace = document["environment"]["pace_ms"]
    assert pace["start"] > 0 and pace["end"] > 0
    assert f"took {pace['start']:g} ms of CPU at the start" in result.stderr
