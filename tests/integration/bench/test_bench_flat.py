"""`courier bench flat` at tiny scale: 0 and 2,000 other messages, 50 measured pops each
(the 2,000 level in turns with 50 more on the empty database)."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from helpers.servers import COURIER, environment_without_settings

pytestmark = pytest.mark.slow

LEVELS = (0, 2000)
SAMPLES = 50
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    where = tmp_path_factory.mktemp("flat")
    result = subprocess.run(
        [str(COURIER), "bench", "flat", "--background", ",".join(map(str, LEVELS)),
         "--samples", str(SAMPLES), "--json", "out.json", "--plot", "out.png"],
        cwd=where, env=environment_without_settings(), capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    document = json.loads((where / "out.json").read_text())
    return {"result": result, "document": document, "plot": where / "out.png"}


def test_every_level_stored_its_background_and_every_pop_found_its_message(
    run: dict[str, Any],
) -> None:
    levels = run["document"]["levels"]
    assert [level["background"] for level in levels] == list(LEVELS)
    for level in levels:
        assert level["stored"] == level["background"]
        assert level["samples"] == SAMPLES
        assert level["empty_pops"] == 0
    assert levels[1]["total_bytes"] > levels[0]["total_bytes"]


def test_latencies_are_positive_and_ordered(run: dict[str, Any]) -> None:
    for level in run["document"]["levels"]:
        for name in ("pop_latency", "send_latency"):
            latency = level[name]
            assert 0 < latency["p50_ms"] <= latency["p90_ms"] <= latency["p99_ms"], (name, level)


def test_each_level_is_compared_with_the_empty_database_measured_in_turns(
    run: dict[str, Any],
) -> None:
    empty, loaded = run["document"]["levels"]
    assert empty["alongside"] is None
    assert empty["pop_p50_ratio"] == 1.0 and empty["send_p50_ratio"] == 1.0
    alongside = loaded["alongside"]
    assert alongside["empty_pops"] == 0
    assert 0 < alongside["pop_latency"]["p50_ms"] <= alongside["pop_latency"]["p99_ms"]
    expected = loaded["pop_latency"]["p50_ms"] / alongside["pop_latency"]["p50_ms"]
    assert loaded["pop_p50_ratio"] == pytest.approx(expected)
    assert "pop p50 with 2,000 other messages is" in run["result"].stdout
    assert "measured in turns (needs 0.90-1.10)" in run["result"].stdout


def test_the_plot_is_a_png(run: dict[str, Any]) -> None:
    assert run["plot"].read_bytes()[:8] == PNG_SIGNATURE
