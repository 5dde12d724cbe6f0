"""A real `courier console` process on loopback against DNS rebinding: a page on
another site that points its own name at 127.0.0.1 sends that name as the Host
header, and gets no data, nor can it act, even with the admin token."""

from __future__ import annotations

import subprocess

import httpx
import pytest

from courier.db import repository
from helpers.consoles import ConsoleProcess, StartProcess
from helpers.servers import COURIER, free_port

SECRET = "the-secret-body-4711"
ADMIN = "rebinding-admin-token"


async def seeded(repo: repository.Repository) -> int:
    """One message whose body is the secret; its id."""
    client = await repo.register_client("alice")
    queue = await repo.create_queue("jobs")
    return (await repo.send(client.id, [queue.id], SECRET.encode()))[0]


def read_paths(message_id: int) -> list[str]:
    return [
        "/", "/api/overview", "/api/rates", "/queues", "/api/queues", "/clients",
        f"/messages/{message_id}", f"/api/messages/{message_id}", "/admin",
        "/static/console.js",
    ]  # fmt: skip


def get(console: ConsoleProcess, path: str, host: str) -> httpx.Response:
    return httpx.get(console.url + path, headers={"Host": host}, timeout=10)


@pytest.fixture
def admin_env(home: dict[str, str]) -> dict[str, str]:
    return {**home, "COURIER_ADMIN_TOKEN": ADMIN}


async def test_a_foreign_host_header_gets_no_data(
    dsn: str, repo: repository.Repository, admin_env: dict[str, str], start: StartProcess
) -> None:
    message_id = await seeded(repo)
    console = start(["--dsn", dsn], admin_env)
    for host in ["evil.example", f"evil.example:{console.port}", f"127.0.0.1:{free_port()}"]:
        for path in read_paths(message_id):
            response = get(console, path, host)
            assert response.status_code == 421, (host, path)
            assert SECRET not in response.text
            assert "jobs" not in response.text and "alice" not in response.text
    refused = get(console, "/api/overview", "evil.example")
    assert refused.json()["error"] == "HostNotAllowed"
    # The same requests with a loopback Host read the secret: the check is what hides it.
    for host in [f"127.0.0.1:{console.port}", f"localhost:{console.port}"]:
        assert SECRET in get(console, f"/api/messages/{message_id}", host).text


async def test_a_foreign_host_cannot_act_even_with_the_admin_token(
    dsn: str, repo: repository.Repository, admin_env: dict[str, str], start: StartProcess
) -> None:
    message_id = await seeded(repo)
    console = start(["--dsn", dsn], admin_env)
    headers = {"Host": "evil.example", "X-Courier-Admin-Token": ADMIN}
    async with httpx.AsyncClient(base_url=console.url, headers=headers, timeout=10) as http:
        created = await http.post("/api/queues", json={"name": "x"})
        deleted = await http.delete(f"/api/messages/{message_id}")
        signed_in = await http.post("/admin/sign-in", data={"admin_token": ADMIN})
    assert [created.status_code, deleted.status_code, signed_in.status_code] == [421] * 3
    assert "courier_session" not in signed_in.cookies
    assert [queue.name for queue in await repo.list_queues()] == ["jobs"]
    assert (await repo.get_queue("jobs")).message_count == 1


async def test_allowed_hosts_come_from_the_flag_or_the_environment(
    dsn: str, repo: repository.Repository, home: dict[str, str], start: StartProcess
) -> None:
    message_id = await seeded(repo)
    env = {**home, "COURIER_CONSOLE_ALLOWED_HOST": "proxy.lan"}
    console = start(["--dsn", dsn, "--allowed-host", "console.lan:8443,other.lan"], env)
    path = f"/api/messages/{message_id}"
    for host in ["console.lan:8443", "other.lan", "other.lan:80"]:
        assert SECRET in get(console, path, host).text, host
    assert get(console, path, "console.lan:9999").status_code == 421
    assert get(console, path, "evil.example").status_code == 421
    from_env = start(["--dsn", dsn], env)
    assert SECRET in get(from_env, path, "proxy.lan").text
    assert get(from_env, path, "console.lan:8443").status_code == 421


def test_a_public_address_without_a_viewer_token_is_refused(dsn: str, home: dict[str, str]) -> None:
    for host in ["0.0.0.0", "192.0.2.1", "console.example"]:
        result = subprocess.run(
            [str(COURIER), "console", "--dsn", dsn, "--host", host, "--port", str(free_port())],
            env=home, capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert result.returncode == 2, result.stderr
        assert "not a loopback address" in result.stderr
        assert "viewer token" in result.stderr


async def test_an_action_from_another_origin_is_refused_even_with_the_token(
    dsn: str, admin_env: dict[str, str], start: StartProcess
) -> None:
    console = start(["--dsn", dsn], admin_env)
    own = f"127.0.0.1:{console.port}"

    def create(name: str, **headers: str) -> httpx.Response:
        headers = {"Host": own, "X-Courier-Admin-Token": ADMIN, **headers}
        payload = {"name": name}
        return httpx.post(console.url + "/api/queues", json=payload, headers=headers, timeout=10)

    # A page on another port of this machine: same site, so cookies would go along.
    other_port = create("from-another-port", Origin=f"http://127.0.0.1:{free_port()}")
    assert other_port.status_code == 403 and other_port.json()["error"] == "CrossOrigin"
    assert create("opaque", Origin="null").status_code == 403
    assert create("cross-site", **{"Sec-Fetch-Site": "cross-site"}).status_code == 403
    assert create("own-page", Origin=f"http://{own}").status_code == 201
    assert create("a-tool").status_code == 201  # no Origin: curl with the token
