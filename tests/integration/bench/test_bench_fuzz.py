"""`courier bench fuzz` at small scale: 20,000 frames at one middleware it starts itself,
on the test's database, checked through its JSON, its tables and its exit code."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from courier.bench import fuzzclients, fuzzframes
from helpers.servers import COURIER, environment_without_settings

FRAMES = 20_000
FRAME_TIMEOUT_S = 1.0


@pytest.fixture(scope="module")
def run(module_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    where: Path = tmp_path_factory.mktemp("fuzz")
    result = subprocess.run(
        [str(COURIER), "bench", "fuzz", "--frames", str(FRAMES), "--connections", "16",
         "--frame-timeout", str(FRAME_TIMEOUT_S), "--dsn", module_dsn, "--seed", "11",
         "--json", "out.json"],
        cwd=where, env=environment_without_settings(), capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return {"result": result, "document": json.loads((where / "out.json").read_text())}


def test_every_frame_was_sent_and_every_kind_among_them(run: dict[str, Any]) -> None:
    sent = run["document"]["frames"]
    assert sent["sent"] == FRAMES == sum(sent["by_kind"].values())
    assert set(fuzzframes.KEEPING_WEIGHTS) <= set(sent["by_kind"])
    assert sent["by_kind"][fuzzframes.PARTIAL] >= 1
    assert any(sent["by_kind"].get(kind) for kind in fuzzframes.ENDING_KINDS)


def test_the_server_answered_and_dropped_what_it_should(run: dict[str, Any]) -> None:
    document = run["document"]
    statuses = document["replies"]["by_status"]
    assert statuses["BAD_REQUEST"] > FRAMES / 4 and statuses["NOT_LOGGED_IN"] > 0
    assert statuses["OK"] > 0 and document["replies"]["malformed"] == 0
    endings = document["connections"]["endings"]
    assert not any(endings.get(problem) for problem in fuzzclients.PROBLEMS), endings
    assert endings[fuzzclients.DROPPED_AFTER_STALL] >= 1
    drops = document["connections"]["stall_drop_s"]
    assert FRAME_TIMEOUT_S * 0.9 <= drops["min"] <= drops["max"] < FRAME_TIMEOUT_S + 2


def test_the_good_client_lost_nothing_and_the_server_lived(run: dict[str, Any]) -> None:
    (good,) = run["document"]["well_behaved"]
    # At least one send and its receive while the fuzzers ran; how many more depends
    # on the box's speed (a slow one managed 18 in the run's 3 s).
    assert good["operations"] >= 2 and good["errors"] == 0 and good["lost"] == 0
    (server,) = run["document"]["servers"]
    assert server["alive"] and server["accepting"] and server["bounded"]
    assert 0 < server["rss_start"] <= server["rss_max"]
    assert run["document"]["verdict"]["passed"] is True


def test_the_tables_and_the_verdict_are_printed(run: dict[str, Any]) -> None:
    out = run["result"].stdout
    for title in ("frames sent, by kind", "by how they ended", "replies to the fuzzers",
                  "well-behaved clients", "servers after the fuzz"):  # fmt: skip
        assert title in out
    assert f"{FRAMES:,} frames in" in out and "passed:" in out
