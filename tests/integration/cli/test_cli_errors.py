"""What a command line user sees when things go wrong: a message and a stable exit code."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

from courier import localstate
from helpers.names import Unique
from helpers.servers import ServerProcess, address, closed_port_address

Courier = Any  # conftest.CourierCLI


def fails(result: subprocess.CompletedProcess[str], code: int, message: str) -> None:
    """Exit ``code`` and exactly ``error: <message>`` on stderr (message is a regex)."""
    assert result.returncode == code, (result.stdout, result.stderr)
    assert re.fullmatch(f"error: {message}", result.stderr.strip()), result.stderr


def test_each_error_has_its_message_and_exit_code(courier: Courier, unique: Unique) -> None:
    me, queue, read_only = unique("me"), unique("q"), unique("watcher")
    courier("register", me)
    courier("register", read_only, "--read-only")
    courier("queue", "create", queue, "--as", me)
    courier("send", queue, "keep", "--as", me)

    fails(courier("pop", "nope", "--as", me), 3, "queue 'nope' does not exist")
    fails(courier("queue", "show", "987654321", "--as", me), 3, "queue 987654321 does not exist")
    fails(courier("queue", "create", queue, "--as", me), 4, f"queue '{queue}' already exists")
    fails(
        courier("queue", "delete", queue, "--if-empty", "--as", me),
        5,
        f"queue '{queue}' is not empty",
    )
    # An unknown name fails as a wrong secret does: the one answer of a failed login.
    fails(courier("send", queue, "x", "--as", "ghost"), 12, "login failed")
    fails(courier("register", me), 8, f"a client named '{me}' already exists")
    fails(
        courier("send", queue, "x", "--priority", "0", "--as", me),
        11,
        "priority must be an integer from 1 to 10, not 0",
    )
    fails(courier("send", queue, "x", "--as", read_only), 12, ".*read-only.*")
    fails(
        courier("queue", "list"), 12, re.escape("log in first: pass --as NAME (or set COURIER_AS)")
    )
    fails(
        courier("request", queue, "anyone?", "--timeout", "0.2", "--as", me),
        15,
        rf"no reply to request \d+ in queue '{queue}' within 0\.2s",
    )


def test_a_client_already_online_is_refused(courier: Courier, unique: Unique) -> None:
    me = unique("busy")
    courier("register", me)
    shell = subprocess.Popen(
        courier.command(("shell", "--as", me)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=courier.env,
    )
    try:
        assert shell.stdin is not None and shell.stdout is not None
        shell.stdin.write("whoami\n")
        shell.stdin.flush()
        assert shell.stdout.readline().startswith(f"{me} (client ")  # logged in now
        fails(courier("waiting", "--as", me), 9, f"client '{me}' is already online")
    finally:
        shell.communicate("quit\n", timeout=30)
    assert courier("waiting", "--as", me).returncode == 0  # free again once the shell left


def test_nothing_to_read_exits_6(courier: Courier, unique: Unique) -> None:
    me, queue = unique("me"), unique("q")
    courier("register", me)
    courier("queue", "create", queue, "--as", me)
    fails(courier("pop", queue, "--as", me), 6, "no message")
    fails(courier("peek", "--sender", "987654321", "--as", me), 6, "no message")
    fails(courier("peek", "--as", me), 11, "a read needs a queue or a sender")
    timed_out = courier("receive", queue, "--timeout", "0.2", "--as", me, "--json")
    fails(timed_out, 6, r"no message arrived within 0\.2s")
    assert json.loads(timed_out.stdout) is None


def test_no_server_exits_14(courier: Courier) -> None:
    nobody = closed_port_address()
    result = courier("ping", "--servers", nobody, with_servers=False)
    fails(result, 14, f"cannot reach any server: cannot connect to {nobody}: Connection refused")


def test_bad_command_lines_exit_2(courier: Courier) -> None:
    assert courier("send", "only-a-queue").returncode == 2
    assert courier("pop", "q", "--order", "sideways").returncode == 2
    bad = courier("ping", "--servers", "127.0.0.1:notaport", with_servers=False)
    assert bad.returncode == 2 and "host:port" in bad.stderr


def test_settings_from_the_environment(courier: Courier, unique: Unique) -> None:
    me = unique("env")
    courier("register", me)
    made = courier("queue", "create", unique("q"), "--json", env={"COURIER_AS": me})
    assert made.returncode == 0, made.stderr


def test_servers_default_to_those_of_courier_up(
    courier: Courier, servers: list[ServerProcess]
) -> None:
    data_dir = Path(courier.env["XDG_DATA_HOME"]) / "courier"
    state = localstate.UpState(dsn="", servers=[address(servers[1])], pids=[], admin_token="")
    localstate.write_up_state(data_dir, state)
    result = courier("ping", "--json", with_servers=False)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["server"] == address(servers[1])
