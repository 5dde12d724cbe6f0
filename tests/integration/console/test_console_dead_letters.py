"""Dead letters and held messages in the console: shown with their history, and moved
back ("redrive") by the admin only, whole queues or one message at a time."""

from __future__ import annotations

from typing import Any

import pytest

from courier import models
from courier.console import auth
from courier.db import repository
from helpers.console_session import DeadLetters, dead_letters
from helpers.consoles import RunningConsole

FAILURES = [(b"order 1", "boom"), (b"\x00\xffbad order", "cannot parse")]


@pytest.fixture
async def dead(repo: repository.Repository) -> DeadLetters:
    return await dead_letters(repo, FAILURES)


async def stored(repo: repository.Repository, message_ids: list[int]) -> list[tuple[Any, ...]]:
    """(queue, deliveries, dead_from, failure) of visible messages, straight from the table."""
    records = await repo.pool.fetch(
        "SELECT queue_id, deliveries, dead_from, failure FROM courier_messages"
        " WHERE id = ANY($1) ORDER BY id",
        message_ids,
    )
    return [tuple(record) for record in records]


def admin(console: RunningConsole) -> dict[str, str]:
    return {auth.HEADER: console.admin_token}


async def test_dead_letters_show_their_history(console: RunningConsole, dead: DeadLetters) -> None:
    body = await console.get_json(f"/api/queues/{dead.dlq}/messages")
    rows = body["messages"]["items"]
    assert [row["id"] for row in rows] == dead.dead
    history = [(r["dead_from"], r["dead_from_name"], r["deliveries"], r["failure"]) for r in rows]
    assert history == [
        (dead.orders, "orders", 1, "boom"),
        (dead.orders, "orders", 1, "cannot parse"),
    ]
    assert body["dead_letter_sources"] == [{"id": dead.orders, "name": "orders"}]
    detail = await console.get_json(f"/api/messages/{dead.dead[1]}")
    message = detail["message"]
    assert (message["queue_name"], message["dead_from_name"]) == ("orders-dead", "orders")
    assert (message["deliveries"], message["failure"]) == (1, "cannot parse")

    page = await console.http.get(f"/queues/{dead.dlq}")
    assert "dead letter from" in page.text and "cannot parse" in page.text
    assert 'id="redrive"' in page.text
    message_page = await console.http.get(f"/messages/{dead.dead[0]}")
    for text in ["Dead letter from", "Last failure", "boom", 'id="redrive-message"']:
        assert text in message_page.text, text


async def test_queues_show_their_settings(console: RunningConsole, dead: DeadLetters) -> None:
    queues = {q["name"]: q for q in (await console.get_json("/api/queues"))["queues"]["items"]}
    orders, dlq = queues["orders"], queues["orders-dead"]
    assert (orders["max_deliveries"], orders["dead_letter_queue"]) == (1, dead.dlq)
    assert orders["dead_letter_queue_name"] == "orders-dead"
    assert orders["dead_letter_expired"] is False
    assert (dlq["max_deliveries"], dlq["dead_letter_queue"], dlq["messages"]) == (None, None, 2)
    page = await console.http.get(f"/queues/{dead.orders}")
    assert "orders-dead" in page.text
    assert 'id="redrive"' not in page.text  # nothing to move back from here


async def test_queues_show_their_access_lists(
    console: RunningConsole, dead: DeadLetters, repo: repository.Repository
) -> None:
    admin_client = await repo.register_client("acl-admin", models.ClientMode.ADMIN)
    await repo.set_queue_acl(admin_client.id, models.QueueAcl(dead.orders, (dead.reader,), ()))
    queues = {q["name"]: q for q in (await console.get_json("/api/queues"))["queues"]["items"]}
    reader_name = (await repo.get_client(dead.reader)).name
    assert (queues["orders"]["senders"], queues["orders"]["readers"]) == ([reader_name], [])
    assert (queues["orders-dead"]["senders"], queues["orders-dead"]["readers"]) == (None, None)
    page = await console.http.get(f"/queues/{dead.orders}")
    assert f"{reader_name}, the owner and admins" in page.text
    dlq_page = (await console.http.get(f"/queues/{dead.dlq}")).text
    assert 'id="queue-senders">anyone<' in dlq_page and 'id="queue-readers">anyone<' in dlq_page


async def test_redrive_needs_the_token(
    console: RunningConsole, repo: repository.Repository, dead: DeadLetters
) -> None:
    for headers in [{}, {auth.HEADER: "wrong"}]:
        refused = await console.http.post(f"/api/queues/{dead.dlq}/redrive", headers=headers)
        assert (refused.status_code, refused.json()["error"]) == (403, "NotAuthorised")
    for path in [
        f"/queues/{dead.dlq}/redrive",
        f"/queues/{dead.dlq}/messages/{dead.dead[0]}/redrive",
    ]:
        refused = await console.http.post(path, data={"admin_token": "wrong"})
        assert refused.status_code == 403
        assert "Admin token needed" in refused.text
    assert [row[0] for row in await stored(repo, dead.dead)] == [dead.dlq, dead.dlq]


async def test_api_redrive_moves_every_dead_letter_back(
    console: RunningConsole, repo: repository.Repository, dead: DeadLetters
) -> None:
    [plain] = await repo.send(dead.reader, [dead.dlq], b"not a dead letter")
    response = await console.http.post(f"/api/queues/{dead.dlq}/redrive", headers=admin(console))
    assert response.status_code == 200
    assert response.json() == {"redriven": {"queue": dead.dlq, "moved": 2}}
    assert await stored(repo, dead.dead) == [
        (dead.orders, 0, None, "boom"),
        (dead.orders, 0, None, "cannot parse"),
    ]
    assert await stored(repo, [plain]) == [(dead.dlq, 0, None, None)]
    again = await console.http.post(f"/api/queues/{dead.dlq}/redrive", headers=admin(console))
    assert again.json()["redriven"]["moved"] == 0
    moved_back = await console.get_json(f"/api/queues/{dead.orders}/messages")
    assert [(m["id"], m["dead_from"]) for m in moved_back["messages"]["items"]] == [
        (dead.dead[0], None),
        (dead.dead[1], None),
    ]


async def test_api_redrive_moves_the_messages_given(
    console: RunningConsole, repo: repository.Repository, dead: DeadLetters
) -> None:
    path = f"/api/queues/{dead.dlq}/redrive"
    response = await console.http.post(
        path, json={"message_ids": [dead.dead[1]]}, headers=admin(console)
    )
    assert response.json()["redriven"]["moved"] == 1
    assert await stored(repo, dead.dead) == [
        (dead.dlq, 1, dead.orders, "boom"),
        (dead.orders, 0, None, "cannot parse"),
    ]
    for bad in [{"message_ids": "all"}, {"message_ids": [0]}, {"message_ids": [True]}]:
        refused = await console.http.post(path, json=bad, headers=admin(console))
        assert (refused.status_code, refused.json()["error"]) == (400, "BadRequest"), bad
    missing = await console.http.post("/api/queues/999999/redrive", headers=admin(console))
    assert (missing.status_code, missing.json()["error"]) == (404, "QueueNotFound")


async def test_forms_redrive_a_queue_and_a_message(
    console: RunningConsole, repo: repository.Repository
) -> None:
    dead = await dead_letters(repo, [(b"a", "one"), (b"b", "two"), (b"c", "three")])
    token = {"admin_token": console.admin_token}
    one = await console.http.post(f"/queues/{dead.dlq}/messages/{dead.dead[1]}/redrive", data=token)
    assert (one.status_code, one.headers["location"]) == (303, f"/queues/{dead.dlq}?redriven=1")
    assert [row[0] for row in await stored(repo, dead.dead)] == [dead.dlq, dead.orders, dead.dlq]
    again = await console.http.post(
        f"/queues/{dead.dlq}/messages/{dead.dead[1]}/redrive", data=token
    )
    assert again.status_code == 404
    assert "is not a dead letter" in again.text

    rest = await console.http.post(f"/queues/{dead.dlq}/redrive", data=token)
    assert (rest.status_code, rest.headers["location"]) == (303, f"/queues/{dead.dlq}?redriven=2")
    assert [row[:3] for row in await stored(repo, dead.dead)] == [(dead.orders, 0, None)] * 3
    page = await console.http.get(rest.headers["location"])
    assert "Dead letters moved back to the queues they failed in: 2." in page.text
    spoofed = await console.http.get(f"/queues/{dead.dlq}?redriven=lots")
    assert "Dead letters moved back" not in spoofed.text


async def test_held_messages_are_counted_and_shown(
    console: RunningConsole, repo: repository.Repository
) -> None:
    worker = await repo.register_client("worker")
    queue = await repo.create_queue("work")
    instance = await repo.register_instance("127.0.0.1:1")
    [leased, _] = [
        (await repo.send(worker.id, [queue.id], body))[0] for body in (b"taken", b"waiting")
    ]
    lease = repository.Lease(ms=60_000, instance_id=instance.id)
    await repo.read(worker.id, queue_id=queue.id, pop=True, lease=lease)
    [delayed] = await repo.send(
        worker.id, [queue.id], b"later", options=repository.SendOptions(delay_ms=60_000)
    )
    row = (await console.get_json(f"/api/queues/{queue.id}/messages"))["queue"]
    assert (row["messages"], row["leased"], row["delayed"]) == (1, 1, 1)
    listed = (await console.get_json("/api/queues"))["queues"]["items"][0]
    assert (listed["leased"], listed["delayed"]) == (1, 1)

    taken = await console.get_json(f"/api/messages/{leased}")
    assert taken["whereabouts"]["state"] == "leased"
    assert (taken["whereabouts"]["holder"], taken["whereabouts"]["holder_name"]) == (
        worker.id,
        "worker",
    )
    assert taken["message"]["deliveries"] == 1
    later = await console.get_json(f"/api/messages/{delayed}")
    assert (later["whereabouts"]["state"], later["message"]["body"]) == ("delayed", "later")
    page = await console.http.get(f"/messages/{leased}")
    assert "leased to" in page.text
    assert 'id="delete-message"' not in page.text
