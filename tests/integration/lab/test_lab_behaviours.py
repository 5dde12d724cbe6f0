"""Every behaviour does its job in a real run; the full dataset is what it says."""

from __future__ import annotations

import collections
from pathlib import Path

import asyncpg
import pytest
from lab_helpers import quick_spec, read_kind

from courier.lab import database, runner
from courier.measurements import record_schema

pytestmark = pytest.mark.slow

MIX = {
    "standard": 1, "sender": 2, "reader": 1, "bouncer": 2, "pair-client": 2,
    "pair-server": 1, "producer": 1, "consumer": 1, "ping": 1,
}  # fmt: skip


async def test_each_behaviour_makes_its_requests_with_success(dsn: str, tmp_path: Path) -> None:
    experiment = quick_spec(
        "behaviours", mix=MIX, dataset="full", client_processes=2, middleware=2,
        think_time_ms=5.0, targets_per_message=2, queues=4, duration_s=4.0,
    )  # fmt: skip
    directory = await runner.run_experiment(experiment, runner.RunnerOptions(out=tmp_path, dsn=dsn))
    rows = read_kind(directory / "r000", record_schema.CLIENT_REQUESTS)
    done = collections.defaultdict(collections.Counter)
    for row in rows:
        if row["status"] == "OK":
            done[row["behaviour"]][row["operation"]] += 1
    assert done["standard"]["delete_queue"] > 0
    assert done["sender"]["send"] > 0 and set(done["sender"]) == {"send", "login", "logout"}
    assert done["reader"]["pop"] > 0
    assert done["bouncer"]["queues_for_me"] > 0 and done["bouncer"]["send"] > 2  # bounced on
    assert done["pair-client"]["await_response"] > 0  # replies came back
    assert done["pair-server"]["receive"] > 0 and done["pair-server"]["send"] > 0
    assert done["producer"]["send"] > 0 and done["consumer"]["receive"] > 0
    assert done["ping"]["ping"] > 0
    assert {row["status"] for row in rows} <= {"OK", "QUEUE_EMPTY", "NO_MESSAGE"}


async def test_the_full_dataset_is_twelve_thousand_messages_as_described(dsn: str) -> None:
    connection = await asyncpg.connect(dsn)
    try:
        queue_ids = [
            await connection.fetchval(
                "SELECT id FROM courier_create_queue_v1($1)", f"queue-{n:02d}"
            )
            for n in range(10)
        ]
        receivers = [
            await connection.fetchval(
                "SELECT id FROM courier_register_client_v1($1, 'read_write')", f"client-{n}"
            )
            for n in range(5)
        ]
        stored = await database.prefill_full(dsn, queue_ids, receivers, message_size=2000)
        totals = await connection.fetchrow(
            """SELECT count(*) AS messages, count(DISTINCT queue_id) AS queues,
                      count(DISTINCT sender_id) AS senders,
                      count(receiver_id) AS addressed,
                      min(length(body)) AS shortest, max(length(body)) AS longest,
                      min(priority) AS lowest, max(priority) AS highest
               FROM courier_messages"""
        )
        per_queue = await connection.fetch(
            "SELECT queue_id, count(*) AS n, count(receiver_id) AS addressed"
            " FROM courier_messages GROUP BY queue_id"
        )
        addressed_to = await connection.fetch(
            "SELECT DISTINCT receiver_id FROM courier_messages WHERE receiver_id IS NOT NULL"
        )
    finally:
        await connection.close()
    assert stored == 12_000
    assert dict(totals) == {
        "messages": 12_000, "queues": 10, "senders": 30, "addressed": 6_000,
        "shortest": 2000, "longest": 2000, "lowest": 1, "highest": 10,
    }  # fmt: skip
    assert {row["queue_id"] for row in per_queue} == set(queue_ids)
    assert {(row["n"], row["addressed"]) for row in per_queue} == {(1200, 600)}
    assert {row["receiver_id"] for row in addressed_to} == set(receivers)
