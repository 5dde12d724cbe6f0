"""`courier bench pops` at tiny scale: 400 messages, 1 and 4 poppers, real processes."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from helpers.servers import COURIER, environment_without_settings

pytestmark = pytest.mark.slow

MESSAGES = 400
LEVELS = (1, 4)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    where = tmp_path_factory.mktemp("pops")
    result = subprocess.run(
        [str(COURIER), "bench", "pops", "--messages", str(MESSAGES),
         "--poppers", ",".join(map(str, LEVELS)), "--json", "out.json"],
        cwd=where, env=environment_without_settings(), capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    document = json.loads((where / "out.json").read_text())
    return {"result": result, "document": document}


def test_every_prefilled_message_was_popped_exactly_once(run: dict[str, Any]) -> None:
    levels = run["document"]["levels"]
    assert [level["poppers"] for level in levels] == list(LEVELS)
    for level in levels:
        assert level["pops"] == level["distinct"] == level["messages"] == MESSAGES
        assert level["exactly_once"] is True
        assert level["calls"] == MESSAGES  # one pop per call
        assert level["empty_calls"] == level["poppers"]  # each connection stops once


def test_rates_and_latencies_are_positive_and_ordered(run: dict[str, Any]) -> None:
    for level in run["document"]["levels"]:
        assert level["pops_per_s"] > 0 and level["seconds"] > 0
        assert level["pops_per_s"] == pytest.approx(level["pops"] / level["seconds"])
        latency = level["latency"]
        assert 0 < latency["p50_ms"] <= latency["p90_ms"] <= latency["p99_ms"], level


def test_levels_are_compared_with_four_poppers(run: dict[str, Any]) -> None:
    one, four = run["document"]["levels"]
    assert four["ratio"] == 1.0
    assert one["ratio"] == pytest.approx(one["pops_per_s"] / four["pops_per_s"])
    out = run["result"].stdout
    assert "pops: 400 messages, one pop per call" in out
    assert "every message popped exactly once at every level" in out
