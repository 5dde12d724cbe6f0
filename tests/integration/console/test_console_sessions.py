"""Sessions: signing in puts a random id in the cookie, never a token; the id works
only while this console holds it (until sign-out or expiry). And a console with a
viewer token lets nobody read without it."""

from __future__ import annotations

import asyncio

import httpx

from courier.console import auth
from courier.db import repository
from helpers.consoles import RunningConsole, StartConsole, csrf_token

VIEWER = "console-test-viewer-token"
SECRET = "session-secret-body"


async def seeded(repo: repository.Repository) -> tuple[int, int]:
    """A queue "jobs" holding one secret message: (queue id, message id)."""
    client = await repo.register_client("alice")
    queue = await repo.create_queue("jobs")
    return queue.id, (await repo.send(client.id, [queue.id], SECRET.encode()))[0]


async def sign_in(console: RunningConsole, path: str, form: dict[str, str]) -> str:
    """Sign in; the session id the cookie carries."""
    response = await console.http.post(path, data=form)
    assert response.status_code == 303, response.text
    cookie = response.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie
    return response.cookies[auth.COOKIE]


def with_cookie(console: RunningConsole, session_id: str) -> httpx.AsyncClient:
    """A fresh client that replays a cookie, as a thief holding a copy would."""
    return httpx.AsyncClient(base_url=console.url, cookies={auth.COOKIE: session_id})


async def queue_names(repo: repository.Repository) -> list[str]:
    return [queue.name for queue in await repo.list_queues()]


async def test_the_admin_cookie_carries_a_session_not_the_token(
    console: RunningConsole, repo: repository.Repository
) -> None:
    await seeded(repo)
    session_id = await sign_in(console, "/admin/sign-in", {"admin_token": console.admin_token})
    assert console.admin_token not in session_id and len(session_id) >= 32
    again = await sign_in(console, "/admin/sign-in", {"admin_token": console.admin_token})
    assert again != session_id  # every sign-in makes a new id
    async with with_cookie(console, console.admin_token) as forged:
        refused = await forged.post("/queues", data={"name": "forged"})
    assert refused.status_code == 403
    async with with_cookie(console, again) as copy:
        csrf = await csrf_token(copy)
        created = await copy.post("/queues", data={"name": "by-session", "csrf_token": csrf})
    assert created.status_code == 303
    assert await queue_names(repo) == ["jobs", "by-session"]


async def test_signing_out_ends_the_session_on_the_server(
    console: RunningConsole, repo: repository.Repository
) -> None:
    await seeded(repo)
    session_id = await sign_in(console, "/admin/sign-in", {"admin_token": console.admin_token})
    csrf = await csrf_token(console.http)
    assert (await console.http.post("/admin/sign-out", data={"csrf_token": csrf})).is_redirect
    async with with_cookie(console, session_id) as copy:
        refused = await copy.post("/queues", data={"name": "after sign-out", "csrf_token": csrf})
    assert refused.status_code == 403
    assert "Admin token needed" in refused.text
    assert await queue_names(repo) == ["jobs"]


async def test_a_session_expires(start_console: StartConsole, repo: repository.Repository) -> None:
    await seeded(repo)
    console = await start_console(session_ttl_s=0.5)
    session_id = await sign_in(console, "/admin/sign-in", {"admin_token": console.admin_token})
    async with with_cookie(console, session_id) as copy:
        csrf = await csrf_token(copy)
        in_time = {"name": "in-time", "csrf_token": csrf}
        assert (await copy.post("/queues", data=in_time)).status_code == 303
        await asyncio.sleep(0.6)
        too_late = {"name": "too-late", "csrf_token": csrf}
        assert (await copy.post("/queues", data=too_late)).status_code == 403
    assert await queue_names(repo) == ["jobs", "in-time"]


async def test_with_a_viewer_token_nothing_is_read_without_it(
    start_console: StartConsole, repo: repository.Repository
) -> None:
    queue_id, message_id = await seeded(repo)
    console = await start_console(viewer_token=VIEWER)
    for path in ["/", "/queues", f"/queues/{queue_id}", f"/messages/{message_id}", "/clients"]:
        page = await console.http.get(path)
        assert page.status_code == 401, path
        assert "Sign in needed" in page.text and SECRET not in page.text
    for path in ["/api/overview", "/api/rates", f"/api/messages/{message_id}", "/api/queues"]:
        answer = await console.http.get(path, headers={"Authorization": "Bearer wrong"})
        assert answer.status_code == 401, path
        assert answer.json()["error"] == "NotAuthorised"
        assert answer.headers["www-authenticate"].startswith("Bearer")
    assert (await console.http.get("/admin")).status_code == 200
    assert (await console.http.get("/static/console.css")).status_code == 200


async def test_a_viewer_reads_with_the_token_or_a_session(
    start_console: StartConsole, repo: repository.Repository
) -> None:
    _, message_id = await seeded(repo)
    console = await start_console(viewer_token=VIEWER)
    bearer = {"Authorization": f"Bearer {VIEWER}"}
    assert SECRET in (await console.http.get(f"/api/messages/{message_id}", headers=bearer)).text
    admin = {auth.HEADER: console.admin_token}
    assert (await console.http.get("/api/overview", headers=admin)).status_code == 200

    wrong = await console.http.post("/sign-in", data={"viewer_token": "wrong"})
    assert wrong.status_code == 401 and auth.COOKIE not in wrong.cookies
    session_id = await sign_in(console, "/sign-in", {"viewer_token": VIEWER})
    assert VIEWER not in session_id
    async with with_cookie(console, session_id) as viewer:
        assert SECRET in (await viewer.get(f"/messages/{message_id}")).text
        csrf = await csrf_token(viewer)
        refused = await viewer.post("/queues", data={"name": "viewers cannot", "csrf_token": csrf})
        assert refused.status_code == 403  # a viewer session is no admin session
        await viewer.post("/admin/sign-out", data={"csrf_token": csrf})
        assert (await viewer.get(f"/messages/{message_id}")).status_code == 401
    assert await queue_names(repo) == ["jobs"]


async def test_the_admin_token_signs_in_to_read_as_admin(
    start_console: StartConsole, repo: repository.Repository
) -> None:
    await seeded(repo)
    console = await start_console(viewer_token=VIEWER)
    session_id = await sign_in(console, "/sign-in", {"viewer_token": console.admin_token})
    async with with_cookie(console, session_id) as admin:
        assert (await admin.get("/")).status_code == 200
        csrf = await csrf_token(admin)
        by_admin = {"name": "by-admin", "csrf_token": csrf}
        assert (await admin.post("/queues", data=by_admin)).status_code == 303
    assert await queue_names(repo) == ["jobs", "by-admin"]
