"""Admin actions: refused (403, nothing changes) without the right token, done with it."""

from __future__ import annotations

import pytest

from courier import errors
from courier.console import auth
from courier.db import repository
from helpers.consoles import RunningConsole, csrf_token

BAD_TOKENS = [{}, {auth.HEADER: ""}, {auth.HEADER: "wrong"}]


async def seeded(repo: repository.Repository) -> tuple[int, int, list[int]]:
    """A client, a queue "jobs" and three messages in it."""
    client = await repo.register_client("alice")
    queue = await repo.create_queue("jobs")
    message_ids = []
    for body in [b"one", b"two", b"three"]:
        message_ids += await repo.send(client.id, [queue.id], body)
    return client.id, queue.id, message_ids


async def queue_names(repo: repository.Repository) -> list[str]:
    return [queue.name for queue in await repo.list_queues()]


@pytest.mark.parametrize("headers", BAD_TOKENS)
async def test_api_refuses_without_the_token(
    console: RunningConsole, repo: repository.Repository, headers: dict[str, str]
) -> None:
    _, queue_id, message_ids = await seeded(repo)
    attempts = [
        console.http.post("/api/queues", json={"name": "new"}, headers=headers),
        console.http.delete(f"/api/queues/{queue_id}", headers=headers),
        console.http.delete(f"/api/messages/{message_ids[0]}", headers=headers),
    ]
    for attempt in attempts:
        response = await attempt
        assert response.status_code == 403
        assert response.json()["error"] == "NotAuthorised"
    assert await queue_names(repo) == ["jobs"]
    assert (await repo.get_queue(queue_id)).message_count == 3


async def test_api_creates_a_queue_with_the_token(
    console: RunningConsole, repo: repository.Repository
) -> None:
    headers = {auth.HEADER: console.admin_token}
    response = await console.http.post("/api/queues", json={"name": "fresh"}, headers=headers)
    assert response.status_code == 201
    created = response.json()["queue"]
    assert created["name"] == "fresh"
    assert (await repo.get_queue("fresh")).id == created["id"]
    again = await console.http.post("/api/queues", json={"name": "fresh"}, headers=headers)
    assert (again.status_code, again.json()["error"]) == (409, "QueueExists")
    nameless = await console.http.post("/api/queues", json={"name": " "}, headers=headers)
    assert nameless.status_code == 400
    not_json = await console.http.post("/api/queues", content=b"{oops", headers=headers)
    assert not_json.status_code == 400


async def test_api_deletes_a_message_with_the_token(
    console: RunningConsole, repo: repository.Repository
) -> None:
    client_id, queue_id, message_ids = await seeded(repo)
    headers = {auth.HEADER: console.admin_token}
    response = await console.http.delete(f"/api/messages/{message_ids[1]}", headers=headers)
    assert response.status_code == 200
    assert response.json()["deleted"] == {"message": message_ids[1], "queue": queue_id}
    assert (await repo.get_queue(queue_id)).message_count == 2
    gone = await console.http.get(f"/api/messages/{message_ids[1]}")
    assert gone.status_code == 404
    again = await console.http.delete(f"/api/messages/{message_ids[1]}", headers=headers)
    assert (again.status_code, again.json()["error"]) == (404, "NoMessage")
    popped = [(await repo.read(client_id, queue_id=queue_id, pop=True)).id for _ in range(2)]
    assert popped == [message_ids[0], message_ids[2]]


async def test_api_deletes_a_queue_with_the_token(
    console: RunningConsole, repo: repository.Repository
) -> None:
    _, queue_id, _ = await seeded(repo)
    headers = {auth.HEADER: console.admin_token}
    refused = await console.http.delete(f"/api/queues/{queue_id}?if_empty=true", headers=headers)
    assert (refused.status_code, refused.json()["error"]) == (409, "QueueNotEmpty")
    assert await queue_names(repo) == ["jobs"]
    response = await console.http.delete(f"/api/queues/{queue_id}", headers=headers)
    assert response.status_code == 200
    assert await queue_names(repo) == []
    with pytest.raises(errors.QueueNotFound):
        await repo.get_queue(queue_id)
    missing = await console.http.delete(f"/api/queues/{queue_id}", headers=headers)
    assert missing.status_code == 404


async def test_forms_refuse_without_the_token(
    console: RunningConsole, repo: repository.Repository
) -> None:
    _, queue_id, message_ids = await seeded(repo)
    attempts = [
        ("/queues", {"name": "new"}),
        (f"/queues/{queue_id}/delete", {}),
        (f"/messages/{message_ids[0]}/delete", {"admin_token": "wrong"}),
        ("/admin/sign-in", {"admin_token": "wrong"}),
    ]
    for path, form in attempts:
        response = await console.http.post(path, data=form)
        assert response.status_code == 403, path
        assert "Admin token needed" in response.text
        assert auth.COOKIE not in response.cookies
    assert await queue_names(repo) == ["jobs"]
    assert (await repo.get_queue(queue_id)).message_count == 3


async def test_forms_work_with_the_token_in_the_form(
    console: RunningConsole, repo: repository.Repository
) -> None:
    _, queue_id, message_ids = await seeded(repo)
    token = {"admin_token": console.admin_token}
    created = await console.http.post("/queues", data={"name": "made here", **token})
    assert created.status_code == 303
    new_queue = await repo.get_queue("made here")
    assert created.headers["location"].startswith(f"/queues/{new_queue.id}")
    deleted = await console.http.post(f"/messages/{message_ids[0]}/delete", data=token)
    assert deleted.status_code == 303
    assert deleted.headers["location"].startswith(f"/queues/{queue_id}")
    assert (await repo.get_queue(queue_id)).message_count == 2


async def test_signing_in_sets_a_cookie_that_the_forms_accept(
    console: RunningConsole, repo: repository.Repository
) -> None:
    _, queue_id, _ = await seeded(repo)
    signed_in = await console.http.post("/admin/sign-in", data={"admin_token": console.admin_token})
    assert signed_in.status_code == 303
    cookie_header = signed_in.headers["set-cookie"].lower()
    assert "httponly" in cookie_header and "samesite=strict" in cookie_header
    csrf = {"csrf_token": await csrf_token(console.http)}
    deleted = await console.http.post(f"/queues/{queue_id}/delete", data=csrf)
    assert deleted.status_code == 303
    assert await queue_names(repo) == []
    assert (await console.http.post("/admin/sign-out", data=csrf)).status_code == 303
    refused = await console.http.post("/queues", data={"name": "after sign-out"})
    assert refused.status_code == 403
    assert await queue_names(repo) == []
