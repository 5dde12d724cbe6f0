"""`courier bench chaos`, bounded: 30,000 messages, a middleware killed every 1.5 s.

One run on a fresh durable embedded PostgreSQL through three middleware, with
PostgreSQL restarted once half-way, checked through its JSON and its table: no
message lost, none acked twice, the kills and the restart really happened, and
the clients of the killed middleware carried on elsewhere.
"""

from __future__ import annotations

import json
import socket
import subprocess
from typing import Any

import pytest

from helpers.servers import COURIER, environment_without_settings

pytestmark = pytest.mark.slow

MESSAGES = 30_000
# The kills happen while the producers send: enough messages that a fast machine
# still sends for several kill intervals (at 4,000 sends/s, about 7.5 s: five kills).
KILL_INTERVAL_S = 1.5
REASONS = {
    "lease expired",
    "the connection closed",
    "the middleware holding the lease stopped",
    "the session ended",
    "the receiver gave up",
}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    where = tmp_path_factory.mktemp("chaos")
    result = subprocess.run(
        [str(COURIER), "bench", "chaos", "--messages", str(MESSAGES), "--kill-interval",
         str(KILL_INTERVAL_S), "--log-dir", "logs", "--json", "out.json"],
        cwd=where, env=environment_without_settings(), capture_output=True, text=True,
        timeout=110, check=False,
    )  # fmt: skip
    logs = f"\n(middleware logs in {where / 'logs'})"
    assert result.returncode == 0, result.stdout + result.stderr + logs
    document = json.loads((where / "out.json").read_text())
    return {"result": result, "document": document, "where": where}


def accounts(run: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = run["document"]["accounts"]
    return found


def test_nothing_is_lost_and_nothing_acked_twice(run: dict[str, Any]) -> None:
    found = accounts(run)
    assert found["lost"] == 0, found["lost_examples"]
    assert found["left"] == 0
    assert found["duplicate_acks"] == 0
    assert found["id_mismatches"] == 0
    assert run["document"]["leftovers"] == {"messages": 0, "held": 0}


def test_every_confirmed_message_was_acked(run: dict[str, Any]) -> None:
    found = accounts(run)
    assert found["confirmed"] + found["unconfirmed"] == MESSAGES
    assert found["confirmed"] > MESSAGES * 0.99, found["last_error"]
    assert found["acked"] + found["acked_reply_lost"] >= found["confirmed"]
    assert found["deliveries"] >= found["acked"]
    assert run["document"]["most_waiting"] > 0


def test_every_redelivery_has_a_reason(run: dict[str, Any]) -> None:
    found = accounts(run)
    assert set(found["redelivery_reasons"]) <= REASONS
    assert found["unexplained_redeliveries"] == 0
    assert found["redeliveries"] == sum(found["redelivery_reasons"].values())


def test_middleware_were_killed_and_their_clients_failed_over(run: dict[str, Any]) -> None:
    kills = run["document"]["kills"]
    assert len(kills) >= 3
    instants = [kill["at_s"] for kill in kills]
    assert instants == sorted(instants)
    failovers = [f for kill in kills for f in kill["failovers"]]
    assert failovers, "no kill hit a client"
    for failover in failovers:
        assert 0 <= failover["login_s"] <= failover["answered_s"]
    spread = run["document"]["failover"]
    assert spread["count"] == len(failovers)
    assert spread["p50_s"] <= spread["p99_s"] <= spread["max_s"]


def test_postgresql_was_restarted_once(run: dict[str, Any]) -> None:
    (restart,) = run["document"]["database_restarts"]
    assert 0 < restart["stopped_s"] <= restart["back_s"]
    assert run["document"]["database_recovery"]["count"] > 0


def test_the_table_and_the_verdict_are_printed(run: dict[str, Any]) -> None:
    out = run["result"].stdout
    every = f"a kill every {KILL_INTERVAL_S:g} s"
    assert f"chaos: 8 producers, 8 consumers, 3 middleware, {every}" in out
    assert "lost: 0 (must be 0): met" in out
    assert "duplicate acks: 0 (must be 0): met" in out
    assert "failover (logged in on a survivor) max" in out
    assert run["document"]["verdict"]["passed"] is True


def test_no_middleware_is_left_listening(run: dict[str, Any]) -> None:
    for server in {kill["server"] for kill in run["document"]["kills"]}:
        host, port = server.rsplit(":", 1)
        with pytest.raises(ConnectionRefusedError), socket.create_connection((host, int(port))):
            pass
