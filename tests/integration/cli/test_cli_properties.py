"""Message properties from the command line: send and publish --property, the .jsonl
field properties, and what pop, receive and peek show of them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli_results import as_json, ok

from helpers.names import Unique

Courier = Any  # conftest.CourierCLI


def test_send_property_options_travel_with_the_message_and_reads_show_them(
    courier: Courier, unique: Unique
) -> None:
    me, queue = unique("props"), unique("jobs")
    ok(courier("register", me))
    ok(courier("queue", "create", queue, "--as", me))
    ok(courier("send", queue, "hello", "--property", "trace=t-1", "--property", "eq=a=b",
               "--as", me))  # fmt: skip
    ok(courier("send", queue, "plain", "--as", me))
    peeked = as_json(courier("peek", queue, "--as", me, "--json"))
    assert peeked["properties"] == {"trace": "t-1", "eq": "a=b"}  # split at the first =
    shown = ok(courier("pop", queue, "--as", me))
    assert "properties: " in shown.stdout and "trace=t-1" in shown.stdout
    assert "eq=a=b" in shown.stdout and "hello" in shown.stdout
    plain = as_json(courier("receive", queue, "--timeout", "5", "--as", me, "--json"))
    assert (plain["body"], plain["properties"]) == ("plain", {})
    ok(courier("send", queue, "again", "--as", me))
    assert "properties" not in ok(courier("pop", queue, "--as", me)).stdout


def test_publish_property_options_reach_the_subscription(courier: Courier, unique: Unique) -> None:
    me, news = unique("publisher"), unique("news")
    ok(courier("register", me))
    ok(courier("topic", "create", news, "--as", me))
    ok(courier("subscribe", news, "--as", me))
    ok(courier("publish", news, "hello", "--property", "trace=t-2", "--as", me))
    taken = as_json(courier("pop", f"{news}:{me}", "--as", me, "--json"))
    assert (taken["body"], taken["properties"]) == ("hello", {"trace": "t-2"})


def test_a_bad_property_option_is_refused_before_connecting(courier: Courier) -> None:
    nowhere = ("--servers", "127.0.0.1:1")  # nothing listens there
    for option, said in (("novalue", "'novalue' is not KEY=VALUE"),
                         ("=v", "'=v' is not KEY=VALUE"),
                         ("k=" + "v" * 4097, "a value is at most 4096 bytes")):  # fmt: skip
        refused = courier("send", "q", "body", "--property", option, *nowhere, with_servers=False)
        assert refused.returncode == 2 and said in refused.stderr, refused.stderr
    twice = courier("send", "q", "b", "--property", "k=1", "--property", "k=2", *nowhere,
                    with_servers=False)  # fmt: skip
    assert twice.returncode == 2 and "'k' is given twice" in twice.stderr


def test_jsonl_lines_carry_properties_and_wrong_types_are_named(
    courier: Courier, unique: Unique, tmp_path: Path
) -> None:
    me, queue = unique("bulk-props"), unique("jobs")
    ok(courier("register", me))
    ok(courier("queue", "create", queue, "--as", me))
    source = tmp_path / "messages.jsonl"
    source.write_text(
        json.dumps({"body": "a", "properties": {"n": "1"}}) + "\n"
        + json.dumps("b") + "\n"
        + json.dumps({"body": "c", "properties": {}}) + "\n"
    )  # fmt: skip
    ok(courier("send", queue, "--file", str(source), "--property", "from=cli", "--as", me))
    taken = as_json(courier("receive", queue, "--max", "10", "--as", me, "--json"))
    # A line's own properties win over the option's, even when empty.
    assert [(m["body"], m["properties"]) for m in taken] == [
        ("a", {"n": "1"}), ("b", {"from": "cli"}), ("c", {}),
    ]  # fmt: skip

    wrong_lines = (
        ('{"body": "x", "properties": {"n": null}}', "properties is an object of"),
        ('{"body": "x", "properties": {"n": {"a": 1}}}', "properties is an object of"),
        ('{"body": "x", "properties": ["a"]}', 'not ["a"]'),
        ('{"body": "x", "properties": {"": "v"}}', "property key 1 is empty"),
    )
    for line, said in wrong_lines:
        source.write_text('"fine"\n' + line + "\n")
        wrong = courier("send", queue, "--file", str(source), "--as", me)
        assert wrong.returncode == 2 and "line 2" in wrong.stderr and said in wrong.stderr, (
            wrong.stderr
        )
    assert courier("pop", queue, "--as", me).returncode == 6


def test_a_request_and_its_reply_carry_property_options(courier: Courier, unique: Unique) -> None:
    asker, worker, queue = unique("asker"), unique("worker"), unique("q")
    for name in (asker, worker):
        ok(courier("register", name))
    ok(courier("queue", "create", queue, "--as", asker))
    pending = courier.spawn("request", queue, "job", "--property", "format=text", "--timeout",
                            "20", "--as", asker)  # fmt: skip
    request = as_json(courier("receive", queue, "--timeout", "20", "--as", worker, "--json"))
    assert request["properties"] == {"format": "text"}
    ok(courier("reply", "done", "--to", "-", "--property", "status=ok", "--as", worker,
               input=json.dumps(request)))  # fmt: skip
    out, err = pending.communicate(timeout=30)
    assert pending.returncode == 0, err
    assert "properties: status=ok" in out and "done" in out
