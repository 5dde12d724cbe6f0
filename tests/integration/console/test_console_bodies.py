"""Bodies are bytes: text shows as text, anything else as hex marked binary, in every
page and in the JSON API (which never carries raw bytes: exact bodies are base64)."""

from __future__ import annotations

import base64
import json
import re

import pytest

from courier.console import queries
from courier.db import repository
from helpers.consoles import RunningConsole

BINARY = b"\x00\xff\xfeNUL and invalid UTF-8\x80"
NUL_TEXT = b"valid UTF-8 with a NUL\x00inside"
LONG_TEXT = ("x" + "é" * 100).encode()  # the preview's last byte is half an "é"
BODIES = {"binary": BINARY, "nul": NUL_TEXT, "empty": b"", "long": LONG_TEXT, "text": b"plain"}


@pytest.fixture
async def sent(repo: repository.Repository) -> dict[str, int]:
    """Each body sent to queue "bytes" by client "alice", to herself."""
    alice = await repo.register_client("alice")
    queue = await repo.create_queue("bytes")
    return {
        name: (await repo.send(alice.id, [queue.id], body, receiver=alice.id))[0]
        for name, body in BODIES.items()
    }


async def test_list_previews(console: RunningConsole, sent: dict[str, int]) -> None:
    queue_id = (await console.get_json("/api/queues"))["queues"]["items"][0]["id"]
    body = await console.get_json(f"/api/queues/{queue_id}/messages")
    rows = {row["id"]: row for row in body["messages"]["items"]}
    shown = {name: rows[message_id] for name, message_id in sent.items()}
    assert {name: row["body_bytes"] for name, row in shown.items()} == {
        name: len(data) for name, data in BODIES.items()
    }
    assert {name for name, row in shown.items() if row["body_binary"]} == {"binary", "nul"}
    assert shown["binary"]["body"] == (
        "00 ff fe 4e 55 4c 20 61 6e 64 20 69 6e 76 61 6c 69 64 20 55 54 46 2d 38 80"
    )
    nul = shown["nul"]["body"]
    assert nul.startswith("76 61 6c 69 64 20") and nul.endswith("4c 00 69 6e 73 69 64 65")
    assert (shown["empty"]["body"], shown["text"]["body"]) == ("", "plain")
    preview_chars = (queries.PREVIEW_BYTES - 1) // 2
    assert shown["long"]["body"] == "x" + "é" * preview_chars
    assert not shown["long"]["body_binary"]


async def test_message_api_shows_hex_and_exact_bytes(
    console: RunningConsole, sent: dict[str, int]
) -> None:
    for name, data in BODIES.items():
        response = await console.http.get(f"/api/messages/{sent[name]}")
        detail = json.loads(response.text)  # plain JSON: no bytes anywhere
        assert base64.b64decode(detail["body_base64"]) == data, name
        assert detail["message"]["body_bytes"] == len(data)
    binary = await console.get_json(f"/api/messages/{sent['binary']}")
    assert binary["message"]["body_binary"] is True
    assert binary["message"]["body"] == (
        "00000000  00 ff fe 4e 55 4c 20 61  6e 64 20 69 6e 76 61 6c  |...NUL and inval|\n"
        "00000010  69 64 20 55 54 46 2d 38  80                       |id UTF-8.|"
    )
    long = await console.get_json(f"/api/messages/{sent['long']}")
    assert long["message"]["body"] == LONG_TEXT.decode()


async def test_pages_render_binary_bodies(console: RunningConsole, sent: dict[str, int]) -> None:
    queue_id = (await console.get_json("/api/queues"))["queues"]["items"][0]["id"]
    page = await console.http.get(f"/messages/{sent['binary']}")
    assert page.status_code == 200
    assert "binary: not UTF-8 text, shown as hex" in page.text
    assert "00000000  00 ff fe 4e" in page.text
    assert "\x00" not in page.text
    empty = await console.http.get(f"/messages/{sent['empty']}")
    assert "0 bytes (empty)" in empty.text
    client = (await console.get_json("/api/clients"))["clients"]["items"][0]
    for path in ["/queues", f"/clients/{client['id']}", f"/api/clients/{client['id']}"]:
        response = await console.http.get(path)
        assert response.status_code == 200, path
        assert "\x00" not in response.text, path
    queue_page = await console.http.get(f"/queues/{queue_id}")
    badges = re.findall(r'<span class="badge binary"[^>]*>', queue_page.text)
    assert len([badge for badge in badges if " hidden " not in badge]) == 2


async def test_a_message_page_and_the_api_show_its_properties(
    console: RunningConsole, repo: repository.Repository
) -> None:
    alice = await repo.register_client("alice")
    queue = await repo.create_queue("props")
    trace = {"trace": "t-<1>", "lang": "fr"}
    (with_id,) = await repo.send(
        alice.id, [queue.id], b"x", options=repository.SendOptions(properties=trace)
    )
    (plain_id,) = await repo.send(alice.id, [queue.id], b"y")
    assert (await console.get_json(f"/api/messages/{with_id}"))["properties"] == trace
    assert (await console.get_json(f"/api/messages/{plain_id}"))["properties"] == {}
    page = (await console.http.get(f"/messages/{with_id}")).text
    assert 'id="message-properties"' in page
    assert "<dt>trace</dt><dd>t-&lt;1&gt;</dd>" in page  # escaped like every value shown
    assert 'id="message-properties"' not in (await console.http.get(f"/messages/{plain_id}")).text
