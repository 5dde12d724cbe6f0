"""`courier shell`, driven through its standard input."""

from __future__ import annotations

import json
from typing import Any

from helpers.names import Unique

Courier = Any  # conftest.CourierCLI


def test_the_shell_runs_commands_and_survives_errors(courier: Courier, unique: Unique) -> None:
    me, queue = unique("sheller"), unique("q")
    courier("register", me)
    script = [
        f"queue create {queue}",
        f'send {queue} "hello there" --priority 7',
        f"peek {queue} --json",
        "bogus",
        "pop nope",
        "send --as someone-else q x",
        "waiting",
        f"pop {queue}",
        f"pop {queue}",
        "whoami",
        "help",
        "help send",
        "quit",
        "ping",
    ]
    result = courier("shell", "--as", me, input="\n".join(script) + "\n")
    assert result.returncode == 0, result.stderr
    out, err = result.stdout, result.stderr

    assert f"created queue '{queue}'" in out
    peeked = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    assert (peeked["body"], peeked["priority"]) == ("hello there", 7)
    assert "error: unknown command 'bogus'" in err
    assert "error: queue 'nope' does not exist" in err
    assert f"this shell is logged in as '{me}'" in err
    assert queue in out.split("messages for me", 1)[1]  # the waiting table
    assert "hello there" in out.split("messages for me", 1)[1]  # then the pop
    assert "error: no message" in err  # the second pop
    assert f"{me} (client " in out  # whoami
    assert "receive" in out and "Usage: send [OPTIONS] QUEUE... [BODY]" in out  # help
    assert "pong" not in out  # nothing runs after quit


def test_the_shell_replies_to_the_last_message_received(courier: Courier, unique: Unique) -> None:
    asker, worker, queue = unique("asker"), unique("worker"), unique("q")
    courier("register", asker)
    courier("register", worker)
    courier("queue", "create", queue, "--as", asker)
    pending = courier.spawn("request", queue, "job 1", "--timeout", "20", "--as", asker)

    script = f"receive {queue} --timeout 20\nreply 'job 1 done'\n"
    result = courier("shell", "--as", worker, input=script)
    assert result.returncode == 0, result.stderr
    assert "job 1" in result.stdout and "sent reply" in result.stdout
    out, err = pending.communicate(timeout=30)
    assert pending.returncode == 0, err
    assert "job 1 done" in out


def test_the_shell_needs_a_name(courier: Courier) -> None:
    result = courier("shell", input="quit\n")
    assert result.returncode == 2 and "--as NAME" in result.stderr
