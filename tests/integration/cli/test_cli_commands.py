"""The one-shot client commands, run as subprocesses against real servers."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from cli_results import as_json, ok

from helpers.names import Unique
from helpers.servers import ServerProcess, address

Courier = Any  # conftest.CourierCLI


def register(courier: Courier, name: str) -> int:
    client_id: int = as_json(courier("register", name, "--json"))["id"]
    return client_id


def test_register_and_ping(courier: Courier, servers: list[ServerProcess], unique: Unique) -> None:
    name = unique("alice")
    assert f"registered client '{name}'" in ok(courier("register", name)).stdout
    watcher = as_json(courier("register", unique("watcher"), "--read-only", "--json"))
    assert watcher["mode"] == "read_only" and isinstance(watcher["id"], int)

    assert ok(courier("ping")).stdout.startswith(f"pong from {address(servers[0])} in ")
    pong = as_json(courier("ping", "--json"))
    assert pong["server"] == address(servers[0]) and pong["round_trip_ms"] > 0


def test_queue_commands(courier: Courier, unique: Unique) -> None:
    me = unique("owner")
    register(courier, me)
    name = unique("jobs")
    created = as_json(courier("queue", "create", name, "--as", me, "--json"))
    assert (created["name"], created["message_count"]) == (name, 0)
    ok(courier("send", name, "one", "--as", me))

    shown = as_json(courier("queue", "show", name, "--as", me, "--json"))
    assert (shown["id"], shown["message_count"]) == (created["id"], 1)
    assert as_json(courier("queue", "show", str(created["id"]), "--as", me, "--json")) == shown
    listed = as_json(courier("queue", "list", "--as", me, "--json"))
    assert shown in listed
    table = ok(courier("queue", "list", "--as", me)).stdout
    assert name in table and "messages" in table

    refused = courier("queue", "delete", name, "--if-empty", "--as", me)
    assert refused.returncode == 5 and f"queue '{name}' is not empty" in refused.stderr
    ok(courier("queue", "delete", name, "--as", me))
    gone = courier("queue", "show", name, "--as", me)
    assert gone.returncode == 3
    assert gone.stderr.strip() == f"error: queue '{name}' does not exist"


def test_send_peek_pop_and_waiting(courier: Courier, unique: Unique) -> None:
    alice, bob = unique("alice"), unique("bob")
    register(courier, alice)
    bob_id = register(courier, bob)
    first, second = unique("q"), unique("q")
    for queue in (first, second):
        ok(courier("queue", "create", queue, "--as", alice))

    sent = as_json(courier("send", first, second, "-", "--as", alice, "--json", input="from stdin"))
    assert len(sent["message_ids"]) == 2
    private = courier(
        "send", first, "for bob", "--receiver", str(bob_id), "--priority", "9", "--as", alice
    )
    assert ok(private).stdout.startswith("sent message ")

    waiting = as_json(courier("waiting", "--as", bob, "--json"))
    counts = {queue["name"]: queue["message_count"] for queue in waiting}
    assert (counts.get(first), counts.get(second)) == (2, 1)

    peeked = as_json(courier("peek", first, "--order", "priority", "--as", bob, "--json"))
    assert (peeked["body"], peeked["priority"], peeked["receiver"]) == ("for bob", 9, bob_id)
    popped = as_json(courier("pop", first, "--as", bob, "--json"))
    assert (popped["id"], popped["body"]) == (sent["message_ids"][0], "from stdin")
    human = ok(courier("pop", first, "--as", bob)).stdout
    assert "for bob" in human and f"to client {bob_id}" in human

    empty = courier("pop", first, "--as", bob, "--json")
    assert (empty.returncode, empty.stdout.strip()) == (6, "null")
    assert empty.stderr.strip() == "error: no message"


def test_receiver_by_name_or_by_id(courier: Courier, unique: Unique) -> None:
    alice, bob, carol = unique("alice"), unique("bob"), unique("carol")
    register(courier, alice)
    bob_id = register(courier, bob)
    register(courier, carol)
    queue = unique("q")
    ok(courier("queue", "create", queue, "--as", alice))

    ok(courier("send", queue, "by name", "--receiver", bob, "--as", alice))
    ok(courier("send", queue, "by id", "--receiver", str(bob_id), "--as", alice))
    assert courier("pop", queue, "--as", carol).returncode == 6  # none of it is carol's
    for body in ("by name", "by id"):
        popped = as_json(courier("pop", queue, "--as", bob, "--json"))
        assert (popped["body"], popped["receiver"]) == (body, bob_id)

    ok(courier("send", queue, "from carol", "--as", carol))
    ok(courier("send", queue, "from alice", "--as", alice))
    from_alice = as_json(courier("pop", queue, "--sender", alice, "--as", bob, "--json"))
    assert from_alice["body"] == "from alice"
    unknown = courier("pop", queue, "--sender", unique("nobody"), "--as", bob)
    assert unknown.returncode == 7  # ClientNotFound, and nothing taken
    assert as_json(courier("pop", queue, "--as", bob, "--json"))["body"] == "from carol"

    nobody = unique("nobody")
    refused = courier("send", queue, "lost", "--receiver", nobody, "--as", alice)
    assert refused.returncode == 7  # ClientNotFound
    assert refused.stderr.strip() == f"error: no client named '{nobody}'"
    assert as_json(courier("queue", "show", queue, "--as", alice, "--json"))["message_count"] == 0

    pending = courier.spawn(
        "request", queue, "job", "--receiver", bob, "--timeout", "20", "--as", alice
    )
    job = as_json(courier("receive", queue, "--timeout", "20", "--as", bob, "--json"))
    assert (job["body"], job["receiver"]) == ("job", bob_id)
    ok(courier("reply", "done", "--to", "-", "--as", bob, input=json.dumps(job)))
    assert "done" in finished(pending)

    news = unique("news")
    ok(courier("topic", "create", news, "--as", alice))
    for subscriber in (bob, carol):
        ok(courier("subscribe", news, "--as", subscriber))
    ok(courier("publish", news, "for bob", "--receiver", bob, "--as", alice))
    assert courier("pop", f"{news}:{carol}", "--as", carol).returncode == 6
    copy = as_json(courier("pop", f"{news}:{bob}", "--as", bob, "--json"))
    assert (copy["body"], copy["receiver"]) == ("for bob", bob_id)


def test_request_receive_and_reply(courier: Courier, unique: Unique) -> None:
    asker, worker = unique("asker"), unique("worker")
    asker_id = register(courier, asker)
    register(courier, worker)
    queue = unique("q")
    ok(courier("queue", "create", queue, "--as", asker))

    for answer_with in ("--to", "explicit", "by name"):
        pending = courier.spawn("request", queue, "resize 17", "--timeout", "20", "--as", asker)
        request = as_json(courier("receive", queue, "--timeout", "20", "--as", worker, "--json"))
        assert (request["body"], request["sender"]) == ("resize 17", asker_id)
        if answer_with == "--to":
            reply_args = ["--to", "-"]
        else:
            requester = asker if answer_with == "by name" else str(asker_id)
            reply_args = ["--queue", queue, "--receiver", requester]
            reply_args += ["--context", str(request["context"])]
        replied = courier("reply", f"done via {answer_with}", *reply_args, "--as", worker,
                          input=json.dumps(request))  # fmt: skip
        assert ok(replied).stdout.startswith("sent reply ")
        assert f"done via {answer_with}" in finished(pending)


def test_receive_piped_into_reply(courier: Courier, unique: Unique) -> None:
    asker, worker, queue = unique("asker"), unique("worker"), unique("q")
    register(courier, asker)
    register(courier, worker)
    ok(courier("queue", "create", queue, "--as", asker))
    pending = courier.spawn("request", queue, "job", "--timeout", "20", "--as", asker)

    receive = courier.spawn("receive", queue, "--timeout", "20", "--as", worker, "--json")
    reply = subprocess.Popen(
        courier.command(("reply", "--to", "-", "piped", "--as", worker)),
        stdin=receive.stdout,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=courier.env,
    )
    assert "sent reply" in finished(reply)
    assert "piped" in finished(pending)


def finished(process: subprocess.Popen[str]) -> str:
    """Wait for a background command; it must succeed. Its stdout."""
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    return out


def test_receive_prints_how_to_reply(courier: Courier, unique: Unique) -> None:
    me = unique("me")
    my_id = register(courier, me)
    queue = unique("q")
    ok(courier("queue", "create", queue, "--as", me))
    ok(courier("send", queue, "hi", "--context", "77", "--as", me))
    received = ok(courier("receive", queue, "--timeout", "5", "--as", me))
    assert "hi" in received.stdout
    assert f"--receiver {my_id} --context 77" in received.stderr
