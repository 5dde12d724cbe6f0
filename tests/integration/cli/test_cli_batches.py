"""Batches from the command line: send --file messages.jsonl, receive --max."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from cli_results import as_json, ok

from helpers.names import Unique

Courier = Any  # conftest.CourierCLI


def test_a_jsonl_file_is_sent_in_batches_and_received_many_at_a_time(
    courier: Courier, unique: Unique, tmp_path: Path
) -> None:
    me, queue = unique("bulk"), unique("jobs")
    ok(courier("register", me))
    ok(courier("queue", "create", queue, "--as", me))
    lines = [json.dumps(f"plain {k}") for k in range(1500)]  # two batches
    lines[3] = json.dumps({"body": "urgent", "priority": 9, "context": 7})
    lines[4] = json.dumps({"body_base64": base64.b64encode(b"\x00\xff").decode()})
    lines.insert(5, "")  # blank lines are skipped
    source = tmp_path / "messages.jsonl"
    source.write_text("\n".join(lines) + "\n")

    sent = as_json(courier("send", queue, "--file", str(source), "--as", me, "--json"))
    assert len(sent["message_ids"]) == 1500
    first = as_json(courier("receive", queue, "--max", "5", "--order", "priority", "--as", me,
                            "--json"))  # fmt: skip
    assert (first[0]["body"], first[0]["priority"], first[0]["context"]) == ("urgent", 9, 7)
    assert [message["body"] for message in first[1:4]] == ["plain 0", "plain 1", "plain 2"]
    assert base64.b64decode(first[4]["body_base64"]) == b"\x00\xff"
    rest = as_json(courier("receive", queue, "--max", "1000", "--as", me, "--json"))
    assert len(rest) == 1000 and rest[0]["body"] == "plain 5"
    human = ok(courier("receive", queue, "--max", "1000", "--as", me))
    assert human.stdout.count("plain ") == 495
    empty = courier("receive", queue, "--max", "10", "--timeout", "0.2", "--as", me)
    assert empty.returncode == 6


def test_a_bad_line_is_named_and_nothing_is_sent(
    courier: Courier, unique: Unique, tmp_path: Path
) -> None:
    me, queue = unique("careful"), unique("jobs")
    ok(courier("register", me))
    ok(courier("queue", "create", queue, "--as", me))
    source = tmp_path / "messages.jsonl"
    source.write_text('"fine"\n{"body": "x", "colour": "red"}\n')
    refused = courier("send", queue, "--file", str(source), "--as", me)
    assert refused.returncode == 2 and "line 2" in refused.stderr and "colour" in refused.stderr
    for line, said in (('{"body": "x", "priority": "high"}', 'priority is an integer, not "high"'),
                       ('{"body": 5}', "body is a JSON string, not 5"),
                       ('{"body": "x", "receiver": true}',
                        "receiver is a client id or name, not true"),
                       ("not json", "line 1: not JSON")):  # fmt: skip
        source.write_text(line + "\n")
        wrong = courier("send", queue, "--file", str(source), "--as", me)
        assert wrong.returncode == 2 and said in wrong.stderr, wrong.stderr
    stdin = courier("send", queue, "--file", "-", "--jsonl", "--as", me,
                    input='"a"\n{"body": "b", "priority": 0}\n')  # fmt: skip
    assert stdin.returncode != 0 and "message 2 of the batch" in stdin.stderr
    assert courier("pop", queue, "--as", me).returncode == 6


def test_a_jsonl_line_names_its_receiver_by_name_or_id(
    courier: Courier, unique: Unique, tmp_path: Path
) -> None:
    me, bob, carol, queue = unique("bulk"), unique("bob"), unique("carol"), unique("jobs")
    ids = {name: as_json(courier("register", name, "--json"))["id"] for name in (me, bob, carol)}
    bob_id = ids[bob]
    ok(courier("queue", "create", queue, "--as", me))
    source = tmp_path / "addressed.jsonl"
    lines = [{"body": "by name", "receiver": bob}, {"body": "by id", "receiver": bob_id}]
    source.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    ok(courier("send", queue, "--file", str(source), "--as", me))
    assert courier("pop", queue, "--as", carol).returncode == 6  # neither is carol's
    taken = as_json(courier("receive", queue, "--max", "10", "--as", bob, "--json"))
    assert [(m["body"], m["receiver"]) for m in taken] == [("by name", bob_id), ("by id", bob_id)]

    # A name nobody has, on the 1,001st line: refused before the first batch is sent.
    lines = [json.dumps(f"plain {k}") for k in range(1000)]
    lines.append(json.dumps({"body": "lost", "receiver": "nobody-" + me}))
    source.write_text("\n".join(lines) + "\n")
    refused = courier("send", queue, "--file", str(source), "--as", me)
    assert refused.returncode == 7, refused.stderr
    assert refused.stderr.strip() == f"error: no client named 'nobody-{me}'"
    assert courier("pop", queue, "--as", me).returncode == 6
