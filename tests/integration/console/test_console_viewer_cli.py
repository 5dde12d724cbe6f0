"""`courier console` with a viewer token, from a file or the environment: reading
needs it, and it never shows on the command line or in the output."""

from __future__ import annotations

from pathlib import Path

import httpx

from courier.db import repository
from helpers.consoles import ConsoleProcess, StartProcess

SECRET = "viewer-cli-secret-body"


def read(console: ConsoleProcess, token: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.get(console.url + "/api/overview", headers=headers, timeout=10)


async def test_a_viewer_token_from_a_file_guards_every_read(
    dsn: str, repo: repository.Repository, home: dict[str, str], start: StartProcess,
    tmp_path: Path,
) -> None:  # fmt: skip
    client = await repo.register_client("alice")
    queue = await repo.create_queue("jobs")
    message_id = (await repo.send(client.id, [queue.id], SECRET.encode()))[0]
    token_file = tmp_path / "viewer-token"
    token_file.write_text("viewer-from-a-file\n")
    console = start(["--dsn", dsn, "--viewer-token-file", str(token_file)], home)
    assert all("viewer-from-a-file" not in part for part in console.process.args)
    assert "viewer-from-a-file" not in console.output
    async with httpx.AsyncClient(base_url=console.url, timeout=10) as http:
        for path in ["/", f"/messages/{message_id}", f"/api/messages/{message_id}"]:
            refused = await http.get(path)
            assert refused.status_code == 401, path
            assert SECRET not in refused.text
        headers = {"Authorization": "Bearer viewer-from-a-file"}
        assert SECRET in (await http.get(f"/api/messages/{message_id}", headers=headers)).text
    assert read(console, None).json()["error"] == "NotAuthorised"
    assert read(console, "wrong").status_code == 401
    assert read(console, "viewer-from-a-file").json()["counts"]["queues_total"] == 1


def test_a_viewer_token_from_the_environment(
    home: dict[str, str], dsn: str, start: StartProcess
) -> None:
    console = start(["--dsn", dsn], {**home, "COURIER_VIEWER_TOKEN": "viewer-from-env"})
    assert "viewer-from-env" not in console.output
    assert read(console, None).status_code == 401
    assert read(console, "viewer-from-env").status_code == 200
