"""`courier console` as a user runs it: a real process on a free port."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pytest

from courier import localstate
from helpers.consoles import StartProcess
from helpers.servers import COURIER, free_port


def test_a_generated_token_is_printed_once_and_works(
    dsn: str, home: dict[str, str], start: StartProcess
) -> None:
    console = start(["--dsn", dsn], home)
    lines = [line for line in console.output.splitlines() if "admin token" in line]
    assert len(lines) == 1
    token = lines[0].rsplit(" ", 1)[1]
    assert len(token) >= 24
    refused = httpx.post(console.url + "/api/queues", json={"name": "q"})
    assert refused.status_code == 403
    created = httpx.post(
        console.url + "/api/queues", json={"name": "q"}, headers={"X-Courier-Admin-Token": token}
    )
    assert created.status_code == 201
    assert httpx.get(console.url + "/api/overview").json()["counts"]["queues_total"] == 1


def test_a_configured_token_is_used_and_not_printed(
    dsn: str, home: dict[str, str], start: StartProcess
) -> None:
    env = {**home, "COURIER_ADMIN_TOKEN": "from-the-environment"}
    console = start(["--dsn", dsn], env)
    assert "from-the-environment" not in console.output
    assert "admin token" not in console.output
    headers = {"X-Courier-Admin-Token": "from-the-environment"}
    created = httpx.post(console.url + "/api/queues", json={"name": "q"}, headers=headers)
    assert created.status_code == 201


def test_the_database_of_courier_up_is_the_default(
    dsn: str, home: dict[str, str], start: StartProcess
) -> None:
    data_dir = Path(home["XDG_DATA_HOME"]) / "courier"
    state = localstate.UpState(dsn=dsn, servers=[], pids=[], admin_token="up-token")
    localstate.write_up_state(data_dir, state)
    console = start([], home)
    assert "up-token" not in console.output  # `courier up` showed it already
    assert "the token `courier up` printed" in console.output
    headers = {"X-Courier-Admin-Token": "up-token"}
    created = httpx.post(console.url + "/api/queues", json={"name": "q"}, headers=headers)
    assert created.status_code == 201


def test_without_any_database_it_says_what_to_do(home: dict[str, str]) -> None:
    result = subprocess.run(
        [str(COURIER), "console", "--port", str(free_port())],
        env=home, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert result.returncode == 2
    assert "courier up" in result.stderr


def test_a_token_from_a_file_is_used_and_never_on_the_command_line(
    dsn: str, home: dict[str, str], start: StartProcess, tmp_path: Path
) -> None:
    token_file = tmp_path / "admin-token"
    token_file.write_text("from-a-file\n")
    console = start(["--dsn", dsn, "--admin-token-file", str(token_file)], home)
    assert "from-a-file" not in console.output
    assert all("from-a-file" not in part for part in console.process.args)
    headers = {"X-Courier-Admin-Token": "from-a-file"}
    created = httpx.post(console.url + "/api/queues", json={"name": "q"}, headers=headers)
    assert created.status_code == 201
    wrong = httpx.post(
        console.url + "/api/queues", json={"name": "r"}, headers={"X-Courier-Admin-Token": "x"}
    )
    assert wrong.status_code == 403


@pytest.mark.parametrize("role", ["admin", "viewer"])
def test_an_empty_token_file_is_refused(
    dsn: str, home: dict[str, str], tmp_path: Path, role: str
) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n")
    result = subprocess.run(
        [str(COURIER), "console", "--dsn", dsn, "--port", str(free_port()),
         f"--{role}-token-file", str(empty)],
        env=home, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert result.returncode == 2
    assert f"{role} token file is empty" in result.stderr
