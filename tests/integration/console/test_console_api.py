"""The JSON API after a scripted session through the client library and two real
middleware servers: every number and list must match the script's own bookkeeping."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from helpers.console_session import TRICKY_BODY, Expected, scripted_session
from helpers.consoles import RunningConsole, running_console
from helpers.servers import ServerProcess


@dataclass
class Session:
    console: RunningConsole
    expected: Expected
    servers: list[ServerProcess]
    started: datetime
    finished: datetime


@pytest.fixture(scope="module")
async def session(module_dsn: str, servers: list[ServerProcess]) -> AsyncIterator[Session]:
    started = datetime.now(UTC)
    async with scripted_session(servers) as expected:
        finished = datetime.now(UTC)
        async with running_console(module_dsn) as console:
            yield Session(console, expected, servers, started, finished)


def ids(items: Any) -> list[int]:
    return [item["id"] for item in items]


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text)


async def test_overview_counts(session: Session) -> None:
    body = await session.console.get_json("/api/overview")
    assert body["counts"] == {
        "clients_total": 4,
        "clients_online": 3,
        "queues_total": 3,
        "messages_total": len(session.expected.stored),
        "messages_exact": True,
    }
    assert len(session.expected.stored) == 6


async def test_overview_lists_live_instances_with_their_clients(session: Session) -> None:
    body = await session.console.get_json("/api/overview")
    instances = body["instances"]
    assert len(instances) == 2
    by_port = {int(i["address"].rsplit(":", 1)[1]): i for i in instances}
    ports = [server.port for server in session.servers]
    assert set(by_port) == set(ports)
    assert by_port[ports[0]]["clients"] == 2  # alice and bob
    assert by_port[ports[1]]["clients"] == 1  # carol
    for instance in instances:
        assert 0 <= instance["heartbeat_age_s"] < 1.5  # the servers beat every 0.2 s


async def test_client_list_shows_state_and_counts(session: Session) -> None:
    expected = session.expected
    body = await session.console.get_json("/api/clients")
    rows = {row["name"]: row for row in body["clients"]["items"]}
    assert list(rows) == ["alice", "bob", "carol", "dave"]
    for name, row in rows.items():
        assert row["id"] == expected.client_ids[name]
        assert row["online"] is (name in expected.online)
        assert row["sent"] == len(expected.sent_by(name))
        assert row["waiting"] == len(expected.waiting_for(name))
    assert (rows["alice"]["sent"], rows["alice"]["waiting"]) == (4, 1)
    assert (rows["bob"]["sent"], rows["bob"]["waiting"]) == (2, 1)
    assert rows["carol"]["mode"] == "read_only"
    assert rows["dave"]["instance"] is None
    assert body["clients"]["next_after"] is None


async def test_client_search_is_a_case_insensitive_substring(session: Session) -> None:
    body = await session.console.get_json("/api/clients", q="AR")
    assert [row["name"] for row in body["clients"]["items"]] == ["carol"]
    body = await session.console.get_json("/api/clients", q="zz")
    assert body["clients"]["items"] == []


async def test_client_list_pages_by_id(session: Session) -> None:
    first = await session.console.get_json("/api/clients", limit=3)
    assert [row["name"] for row in first["clients"]["items"]] == ["alice", "bob", "carol"]
    cursor = first["clients"]["next_after"]
    assert cursor == session.expected.client_ids["carol"]
    rest = await session.console.get_json("/api/clients", limit=3, after=cursor)
    assert [row["name"] for row in rest["clients"]["items"]] == ["dave"]
    assert rest["clients"]["next_after"] is None


async def test_client_page_lists_sent_and_waiting_messages(session: Session) -> None:
    expected = session.expected
    for name in ["alice", "bob", "dave"]:
        body = await session.console.get_json(f"/api/clients/{expected.client_ids[name]}")
        assert body["client"]["name"] == name
        assert ids(body["sent"]["items"]) == expected.sent_by(name)
        assert ids(body["waiting"]["items"]) == expected.waiting_for(name)
    alice = await session.console.get_json(f"/api/clients/{expected.client_ids['alice']}")
    waiting = alice["waiting"]["items"][0]
    assert (waiting["body"], waiting["context"], waiting["sender_name"]) == (
        "reply to alice",
        42,
        "bob",
    )


async def test_queue_list_counts_and_oldest_message(session: Session) -> None:
    expected = session.expected
    body = await session.console.get_json("/api/queues")
    rows = {row["name"]: row for row in body["queues"]["items"]}
    assert list(rows) == ["jobs", "replies", "empty"]
    for name, row in rows.items():
        assert row["id"] == expected.queue_ids[name]
        assert row["messages"] == len(expected.in_queue(name))
    assert [rows[name]["messages"] for name in rows] == [4, 2, 0]
    assert rows["empty"]["oldest_at"] is None and rows["empty"]["oldest_age_s"] is None
    for name in ["jobs", "replies"]:
        oldest = parse_time(rows[name]["oldest_at"])
        assert session.started <= oldest <= session.finished
        assert rows[name]["oldest_age_s"] >= 0
    jobs_oldest = await session.console.get_json(f"/api/messages/{expected.in_queue('jobs')[0]}")
    assert jobs_oldest["message"]["created_at"] == rows["jobs"]["oldest_at"]


async def test_queue_page_lists_its_messages_in_order(session: Session) -> None:
    expected = session.expected
    body = await session.console.get_json(f"/api/queues/{expected.queue_ids['jobs']}/messages")
    assert body["queue"]["messages"] == 4
    assert ids(body["messages"]["items"]) == expected.in_queue("jobs")
    assert body["messages"]["next_after"] is None
    assert session.expected.popped[0] not in ids(body["messages"]["items"])


@pytest.mark.parametrize(
    ("filters", "keep"),
    [
        ({"sender": "bob"}, lambda m: m.sender == "bob"),
        ({"receiver": "bob"}, lambda m: m.receiver == "bob"),
        ({"receiver": 0}, lambda m: m.receiver is None),
        ({"priority": 9}, lambda m: m.priority == 9),
        ({"sender": "alice", "priority": 3}, lambda m: m.sender == "alice" and m.priority == 3),
    ],
)
async def test_queue_page_filters(session: Session, filters: dict[str, Any], keep: Any) -> None:
    expected = session.expected
    query = {
        key: expected.client_ids[value] if isinstance(value, str) else value
        for key, value in filters.items()
    }
    body = await session.console.get_json(
        f"/api/queues/{expected.queue_ids['jobs']}/messages", **query
    )
    wanted = sorted(m.id for m in expected.stored.values() if m.queue == "jobs" and keep(m))
    assert wanted, "each filter should match something"
    assert ids(body["messages"]["items"]) == wanted
    assert body["messages"]["scan_limited"] is False


async def test_queue_page_walks_one_message_per_page(session: Session) -> None:
    queue_id = session.expected.queue_ids["jobs"]
    seen: list[int] = []
    cursor = 0
    while True:
        body = await session.console.get_json(
            f"/api/queues/{queue_id}/messages", limit=1, after=cursor
        )
        seen += ids(body["messages"]["items"])
        cursor = body["messages"]["next_after"]
        if cursor is None:
            break
    assert seen == session.expected.in_queue("jobs")


async def test_message_page_shows_every_field(session: Session) -> None:
    expected = session.expected
    sent = expected.by_name(TRICKY_BODY)
    body = await session.console.get_json(f"/api/messages/{sent.id}")
    message = body["message"]
    assert (message["body"], message["body_binary"]) == (TRICKY_BODY, False)
    assert message["body_bytes"] == len(TRICKY_BODY.encode()) > len(TRICKY_BODY)
    assert base64.b64decode(body["body_base64"]) == TRICKY_BODY.encode()
    assert (message["deliveries"], message["dead_from"], message["failure"]) == (0, None, None)
    assert body["whereabouts"]["state"] == "visible"
    assert (message["queue"], message["queue_name"]) == (expected.queue_ids["jobs"], "jobs")
    assert (message["sender"], message["sender_name"]) == (expected.client_ids["alice"], "alice")
    assert (message["receiver"], message["receiver_name"], message["context"]) == (None, None, None)
    assert message["priority"] == 9
    assert session.started <= parse_time(message["created_at"]) <= session.finished
    reply = await session.console.get_json(f"/api/messages/{expected.by_name('reply to alice').id}")
    assert (reply["message"]["receiver_name"], reply["message"]["context"]) == ("alice", 42)


async def test_message_page_html_escapes_the_body(session: Session) -> None:
    sent = session.expected.by_name(TRICKY_BODY)
    response = await session.console.http.get(f"/messages/{sent.id}")
    assert response.status_code == 200
    assert "&lt;script&gt;alert(" in response.text
    assert '<script>alert("x")' not in response.text


async def test_every_html_page_renders(session: Session) -> None:
    expected = session.expected
    pages = {
        "/": ["Overview", "Middleware instances"],
        "/clients": ["alice", "carol"],
        f"/clients/{expected.client_ids['alice']}": ["reply to alice"],
        "/queues": ["jobs", "replies", "empty"],
        f"/queues/{expected.queue_ids['replies']}": ["to both queues", "reply to alice"],
        f"/messages/{expected.by_name('for bob only').id}": ["for bob only", "bob"],
        "/admin": ["Sign in"],
    }
    for path, texts in pages.items():
        response = await session.console.http.get(path)
        assert response.status_code == 200, path
        for text in texts:
            assert text in response.text, (path, text)


@pytest.mark.parametrize(
    ("path", "status", "error"),
    [
        ("/api/messages/999999", 404, "NoMessage"),
        ("/api/clients/999999", 404, "ClientNotFound"),
        ("/api/queues/999999/messages", 404, "QueueNotFound"),
        ("/api/clients?limit=0", 400, "BadRequest"),
        ("/api/clients?limit=100000", 400, "BadRequest"),
        ("/api/queues?after=abc", 400, "BadRequest"),
        ("/api/queues/1/messages?priority=11", 400, "InvalidPriority"),
        ("/api/queues/1/messages?sender=-3", 400, "BadRequest"),
    ],
)
async def test_bad_requests_get_typed_errors(
    session: Session, path: str, status: int, error: str
) -> None:
    response = await session.console.http.get(path)
    assert response.status_code == status
    assert response.json()["error"] == error


async def test_unknown_message_page_is_a_404_page(session: Session) -> None:
    response = await session.console.http.get("/messages/999999")
    assert response.status_code == 404
    assert "message 999999 does not exist" in response.text


def test_static_files_are_packaged() -> None:
    static = Path(__file__).parents[3] / "src/courier/console/static"
    assert {"console.js", "rates.js", "console.css"} <= {p.name for p in static.iterdir()}
