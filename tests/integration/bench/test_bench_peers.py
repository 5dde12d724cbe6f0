"""`courier bench peers` as a user runs it: real processes, a real database, short levels.

One run of Courier and its database tier at 1 and 4 clients on a fresh durable
embedded PostgreSQL (what the command does by default), checked through its JSON,
its plot and its tables; and one run whose RabbitMQ cannot be reached, which says
so and finishes.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from helpers.servers import COURIER, environment_without_settings

pytestmark = pytest.mark.slow

SYSTEMS = ("courier", "courier-db")
LEVELS = (1, 4)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
UNREACHABLE = "amqp://guest:guest@127.0.0.1:1/"


def bench(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(COURIER), "bench", "peers", *args],
        cwd=tmp_path, env=environment_without_settings(), capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    where = tmp_path_factory.mktemp("bench")
    result = bench(
        where, "--systems", ",".join(SYSTEMS), "--clients", ",".join(map(str, LEVELS)),
        "--duration", "1", "--warmup", "0.5", "--json", "out.json", "--plot", "out.png",
        "--rabbitmq", "none",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    document = json.loads((where / "out.json").read_text())
    return {"result": result, "document": document, "plot": where / "out.png"}


def test_every_system_and_level_did_work_with_ordered_percentiles(run: dict[str, Any]) -> None:
    found = {(r["system"], r["clients"]): r for r in run["document"]["results"]}
    assert set(found) == {(system, level) for system in SYSTEMS for level in LEVELS}
    for key, level in found.items():
        assert level["ops_per_s"] > 0, key
        assert level["sends"] > 0 and level["pops"] > 0, key
        assert level["errors"] == 0, (key, level["last_error"])
        latency = level["latency"]
        assert 0 < latency["p50_ms"] <= latency["p90_ms"] <= latency["p99_ms"], key
        # Every client pops right after its send: pops and sends are near equal.
        assert abs(level["sends"] - level["pops"]) <= level["clients"], key


def test_courier_is_compared_with_its_database_tier_at_every_level(run: dict[str, Any]) -> None:
    ratios = {r["clients"]: r for r in run["document"]["ratios"]}
    assert set(ratios) == set(LEVELS)
    results = {(r["system"], r["clients"]): r for r in run["document"]["results"]}
    for clients, ratio in ratios.items():
        assert ratio["peer"] == "courier-db"
        expected = (
            results["courier", clients]["ops_per_s"] / results["courier-db", clients]["ops_per_s"]
        )
        assert ratio["ops"] == pytest.approx(expected)


def test_the_spec_says_what_ran(run: dict[str, Any]) -> None:
    spec = run["document"]["spec"]
    assert spec["systems"] == list(SYSTEMS)
    assert spec["clients"] == list(LEVELS)
    assert spec["database"] == "fresh embedded PostgreSQL, durable"
    # The middleware required secrets: every client logged in with its own (SCRAM).
    assert spec["login"] == "secret" and spec["tls"] is False
    assert run["document"]["environment"]["servers"]["postgresql"]


def test_the_machines_pace_is_recorded_and_shown(run: dict[str, Any]) -> None:
    pace = run["document"]["environment"]["pace_ms"]
    assert pace["start"] > 0 and pace["end"] > 0
    shown = f"took {pace['start']:g} ms of CPU at the start and {pace['end']:g} ms at the end"
    assert shown in run["result"].stderr


def test_a_tls_run_with_open_logins_does_its_work(tmp_path: Path) -> None:
    result = bench(
        tmp_path, "--systems", "courier", "--clients", "2", "--duration", "1", "--warmup",
        "0.5", "--batch", "10", "--tls", "--login", "open", "--rabbitmq", "none",
        "--json", "out.json",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    document = json.loads((tmp_path / "out.json").read_text())
    assert document["spec"]["tls"] is True and document["spec"]["login"] == "open"
    (level,) = document["results"]
    assert level["errors"] == 0, level["last_error"]
    assert level["sends"] > 0 and level["pops"] > 0


def test_the_plot_is_a_png(run: dict[str, Any]) -> None:
    assert run["plot"].read_bytes()[:8] == PNG_SIGNATURE


def test_a_table_per_level_is_printed(run: dict[str, Any]) -> None:
    out = run["result"].stdout
    assert "1 clients" in out and "4 clients" in out
    assert "courier-db" in out and "ratios are courier ÷ this system" in out


def test_rabbitmq_none_leaves_it_out_quietly(run: dict[str, Any]) -> None:
    assert run["document"]["skipped"] == {}
    assert "RabbitMQ" not in run["result"].stdout + run["result"].stderr


def test_an_unreachable_rabbitmq_is_said_and_skipped(tmp_path: Path) -> None:
    result = bench(
        tmp_path, "--systems", "rabbitmq", "--clients", "1", "--rabbitmq", UNREACHABLE,
        "--json", "out.json",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "RabbitMQ: not reachable at amqp://guest:***@127.0.0.1:1/, skipped" in result.stdout
    document = json.loads((tmp_path / "out.json").read_text())
    assert list(document["skipped"]) == ["rabbitmq"]
    assert document["results"] == []


def two_rounds(tmp_path: Path, *more: str) -> tuple[subprocess.CompletedProcess[str], Any]:
    """Courier and its database tier at 1 and 2 clients, twice: the run and its JSON."""
    result = bench(
        tmp_path, "--systems", ",".join(SYSTEMS), "--clients", "1,2", "--warmup", "0.5",
        "--rounds", "2", "--rabbitmq", "none", "--json", "out.json", *more,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return result, json.loads((tmp_path / "out.json").read_text())


def run_order(document: Any) -> list[tuple[str, int, int]]:
    """(system, round, clients) of every level, in the order they ran."""
    return [(level["system"], level["round"], level["clients"]) for level in document["results"]]


def test_rounds_take_turns_and_give_each_ratio_and_its_spread(tmp_path: Path) -> None:
    result, document = two_rounds(tmp_path, "--duration", "1", "--plot", "out.png")
    assert document["spec"]["rounds"] == 2
    assert document["spec"]["order"] == "levels"
    # At each level the systems take turns, so the runs a ratio compares are seconds
    # apart. The second round runs the levels, and the systems at each, in the reverse
    # order: neither system nor level always goes first.
    assert run_order(document) == [
        ("courier", 1, 1), ("courier-db", 1, 1), ("courier", 1, 2), ("courier-db", 1, 2),
        ("courier-db", 2, 2), ("courier", 2, 2), ("courier-db", 2, 1), ("courier", 2, 1),
    ]  # fmt: skip
    rates = {
        (r["system"], r["round"]): r["ops_per_s"] for r in document["results"] if r["clients"] == 2
    }
    by_round = {r["round"]: r["ops"] for r in document["ratios"] if r["clients"] == 2}
    for round_number in (1, 2):
        expected = rates["courier", round_number] / rates["courier-db", round_number]
        assert by_round[round_number] == pytest.approx(expected)
    (spread,) = [s for s in document["ratio_spreads"] if s["clients"] == 2]
    assert spread["rounds"] == 2
    assert spread["ops_median"] == pytest.approx((by_round[1] + by_round[2]) / 2)
    assert (spread["ops_min"], spread["ops_max"]) == (min(by_round.values()),
                                                      max(by_round.values()))  # fmt: skip
    assert "ratios over the rounds" in result.stdout
    assert (tmp_path / "out.png").read_bytes()[:8] == PNG_SIGNATURE


def test_order_systems_runs_each_system_over_every_level_in_turn(tmp_path: Path) -> None:
    _, document = two_rounds(tmp_path, "--duration", "0.5", "--order", "systems")
    assert document["spec"]["order"] == "systems"
    assert run_order(document) == [
        ("courier", 1, 1), ("courier", 1, 2), ("courier-db", 1, 1), ("courier-db", 1, 2),
        ("courier-db", 2, 2), ("courier-db", 2, 1), ("courier", 2, 2), ("courier", 2, 1),
    ]  # fmt: skip
    assert all(level["errors"] == 0 and level["operations"] > 0 for level in document["results"])


def test_with_rounds_a_skip_is_filed_under_each_round(tmp_path: Path) -> None:
    result = bench(
        tmp_path, "--systems", "rabbitmq", "--clients", "1", "--rabbitmq", UNREACHABLE,
        "--rounds", "2", "--json", "out.json",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    document = json.loads((tmp_path / "out.json").read_text())
    assert list(document["skipped"]) == ["rabbitmq#1", "rabbitmq#2"]
    assert document["results"] == [] and document["ratio_spreads"] == []
