"""Console hardening: forms that rely on a session need its CSRF token, every response
carries a strict Content-Security-Policy, and every admin action is logged with who
did what."""

from __future__ import annotations

import logging

import httpx
import pytest

from courier.console import auth, headers
from courier.db import repository
from helpers.consoles import RunningConsole, csrf_token

AUDIT = "courier.console.audit"


async def queue_names(repo: repository.Repository) -> list[str]:
    return [queue.name for queue in await repo.list_queues()]


async def signed_in(console: RunningConsole) -> str:
    """Sign the console's client in as admin; the session's CSRF token."""
    response = await console.http.post("/admin/sign-in", data={"admin_token": console.admin_token})
    assert response.status_code == 303
    return await csrf_token(console.http)


async def test_a_session_form_without_its_csrf_token_is_refused(
    console: RunningConsole, repo: repository.Repository
) -> None:
    csrf = await signed_in(console)
    for form in [{}, {"csrf_token": ""}, {"csrf_token": "guessed"}]:
        refused = await console.http.post("/queues", data={"name": "forged", **form})
        assert refused.status_code == 403
        assert "CSRF token is missing or wrong" in refused.text
    assert await queue_names(repo) == []
    created = await console.http.post("/queues", data={"name": "real", "csrf_token": csrf})
    assert created.status_code == 303
    assert await queue_names(repo) == ["real"]


async def test_the_csrf_token_belongs_to_one_session(console: RunningConsole) -> None:
    first = await signed_in(console)
    second = await signed_in(console)  # signing in again makes a new session
    assert first != second
    stale = await console.http.post("/queues", data={"name": "stale", "csrf_token": first})
    assert stale.status_code == 403


async def test_signing_out_needs_the_csrf_token(console: RunningConsole) -> None:
    csrf = await signed_in(console)
    forged = await console.http.post("/admin/sign-out")
    assert forged.status_code == 403
    assert "signed in as admin" in (await console.http.get("/admin")).text
    done = await console.http.post("/admin/sign-out", data={"csrf_token": csrf})
    assert done.status_code == 303
    assert "signed in as admin" not in (await console.http.get("/admin")).text


async def test_a_form_with_the_admin_token_itself_needs_no_session(
    console: RunningConsole, repo: repository.Repository
) -> None:
    fields = {"name": "by-token", "admin_token": console.admin_token}
    assert (await console.http.post("/queues", data=fields)).status_code == 303
    assert await queue_names(repo) == ["by-token"]


async def test_the_pages_carry_the_csrf_token_only_for_a_session(console: RunningConsole) -> None:
    assert 'name="csrf_token"' not in (await console.http.get("/queues")).text
    csrf = await signed_in(console)
    page = (await console.http.get("/queues")).text
    assert f'name="csrf_token" value="{csrf}"' in page


@pytest.mark.parametrize("path", ["/", "/queues", "/admin", "/api/overview", "/static/console.js",
                                  "/queues/999999", "/no-such-page"])  # fmt: skip
async def test_every_response_has_a_strict_content_security_policy(
    console: RunningConsole, path: str
) -> None:
    response = await console.http.get(path)
    policy = response.headers["content-security-policy"]
    assert policy == headers.CONTENT_SECURITY_POLICY
    assert "'unsafe-inline'" not in policy and "default-src 'none'" in policy
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["x-frame-options"] == "DENY"


async def test_a_refused_host_gets_the_headers_too(console: RunningConsole) -> None:
    response = await console.http.get("/", headers={"Host": "evil.example"})
    assert response.status_code == 421
    assert "content-security-policy" in response.headers


async def test_the_pages_have_no_inline_script_or_style(console: RunningConsole) -> None:
    await signed_in(console)
    for path in ["/", "/queues", "/clients", "/admin"]:
        page = (await console.http.get(path)).text.lower()
        assert "<script>" not in page and "<style" not in page and " style=" not in page, path
        assert " onclick=" not in page and " onsubmit=" not in page, path


async def test_admin_actions_are_logged_with_who_and_what(
    console: RunningConsole, repo: repository.Repository, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT)
    api = {auth.HEADER: console.admin_token}
    created = await console.http.post("/api/queues", json={"name": "audited"}, headers=api)
    queue_id = created.json()["queue"]["id"]
    csrf = await signed_in(console)
    await console.http.post(f"/queues/{queue_id}/delete", data={"csrf_token": csrf})
    async with httpx.AsyncClient(base_url=console.url) as stranger:
        await stranger.post("/admin/sign-in", data={"admin_token": "wrong"})

    lines = [record.getMessage() for record in caplog.records if record.name == AUDIT]
    assert any(
        line.startswith("admin action by api token from 127.0.0.1:")
        and line.endswith(f"created queue 'audited' (id {queue_id})")
        for line in lines
    ), lines
    assert any("form token from 127.0.0.1:" in line and "signed in as admin" in line
               for line in lines), lines  # fmt: skip
    assert any(line.startswith("admin action by session ") and
               line.endswith(f"deleted queue {queue_id}") for line in lines), lines  # fmt: skip
    assert any(line.startswith("admin sign-in refused: wrong token from 127.0.0.1:")
               for line in lines), lines  # fmt: skip
    assert console.admin_token not in " ".join(lines)
    assert await queue_names(repo) == []
