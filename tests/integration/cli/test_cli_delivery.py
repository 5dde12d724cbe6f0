"""Leases from the command line: receive --lease, then ack or nack by delivery id in a
later command; binary bodies from files; queue settings."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

from cli_results import as_json, ok

from helpers.names import Unique

Courier = Any  # conftest.CourierCLI


def test_receive_with_a_lease_then_ack_in_another_command(courier: Courier, unique: Unique) -> None:
    me, queue = unique("worker"), unique("jobs")
    ok(courier("register", me))
    ok(courier("queue", "create", queue, "--as", me))
    ok(courier("send", queue, "resize photo 17", "--as", me))

    received = ok(courier("receive", queue, "--lease", "30", "--timeout", "5", "--as", me))
    shown = received.stdout + received.stderr  # the settle hint is a note on stderr
    assert "resize photo 17" in shown and "courier ack" in shown
    # The lease outlives the command: the message stays invisible until settled.
    assert courier("pop", queue, "--as", me).returncode == 6
    delivery = int(shown.split("courier ack ")[1].split(")")[0])
    nacked = ok(courier("nack", str(delivery), "--reason", "try later", "--as", me))
    assert f"gave back {delivery}" in nacked.stdout

    again = as_json(courier("receive", queue, "--lease", "30", "--as", me, "--json"))
    assert (again["deliveries"], again["failure"]) == (2, "try later")
    ok(courier("extend", str(again["delivery"]), "60", "--as", me))
    assert (
        f"acknowledged {again['delivery']}"
        in ok(courier("ack", str(again["delivery"]), "--as", me)).stdout
    )
    late = courier("ack", str(again["delivery"]), "--as", me)
    assert late.returncode == 18 and "is not held" in late.stderr


def test_several_deliveries_are_settled_in_one_command(courier: Courier, unique: Unique) -> None:
    me, queue = unique("worker"), unique("jobs")
    ok(courier("register", me))
    ok(courier("queue", "create", queue, "--as", me))
    for n in range(4):
        ok(courier("send", queue, f"job {n}", "--as", me))
    taken = as_json(courier("receive", queue, "--max", "4", "--lease", "30", "--as", me, "--json"))
    first, second, third, fourth = (str(message["delivery"]) for message in taken)
    acked = as_json(courier("ack", first, second, "--as", me, "--json"))
    assert acked == {"acknowledged": [int(first), int(second)], "failed": []}
    # One already settled fails alone: the others are settled, the exit code says so.
    mixed = courier("nack", third, first, fourth, "--as", me)
    assert mixed.returncode == 18
    assert f"gave back {third}, {fourth}" in mixed.stdout
    assert f"error: delivery {first} " in mixed.stderr
    assert len(re.findall(rf"delivery {first}\b", mixed.stderr)) == 1, mixed.stderr  # named once
    again = as_json(courier("receive", queue, "--max", "4", "--lease", "30", "--as", me, "--json"))
    assert sorted(message["body"] for message in again) == ["job 2", "job 3"]


def test_binary_bodies_from_a_file_or_stdin_round_trip(
    courier: Courier, unique: Unique, tmp_path: Path
) -> None:
    me, queue = unique("binary"), unique("blobs")
    ok(courier("register", me))
    ok(courier("queue", "create", queue, "--as", me))
    payload = bytes(range(256)) + b"\x00 tail"
    source = tmp_path / "payload.bin"
    source.write_bytes(payload)
    ok(courier("send", queue, "--file", str(source), "--as", me))
    popped = as_json(courier("pop", queue, "--as", me, "--json"))
    assert base64.b64decode(popped["body_base64"]) == payload
    human = ok(courier("send", queue, "--file", str(source), "--as", me))
    assert "sent message" in human.stdout
    assert "not UTF-8" in ok(courier("pop", queue, "--as", me)).stdout

    ok(courier("send", queue, "-", "--as", me, input="from stdin\n"))
    assert as_json(courier("pop", queue, "--as", me, "--json"))["body"] == "from stdin\n"
    no_body = courier("send", queue, "--as", me)
    assert no_body.returncode == 2 and "name at least one queue" in no_body.stderr


def test_queue_configure_and_delayed_send(courier: Courier, unique: Unique) -> None:
    me, queue, dead = unique("admin"), unique("work"), unique("dead")
    ok(courier("register", me))
    for name in (queue, dead):
        ok(courier("queue", "create", name, "--as", me))
    settings = as_json(
        courier(
            "queue", "configure", queue, "--max-deliveries", "1", "--dead-letter-queue", dead,
            "--as", me, "--json",
        )
    )  # fmt: skip
    assert settings["max_deliveries"] == 1 and settings["dead_letter_queue"] is not None
    ok(courier("send", queue, "poison", "--delay", "0.3", "--dedup-id", "p-1", "--as", me))
    ok(courier("send", queue, "poison", "--delay", "0.3", "--dedup-id", "p-1", "--as", me))
    taken = as_json(
        courier("receive", queue, "--lease", "30", "--timeout", "5", "--as", me, "--json")
    )
    ok(courier("nack", str(taken["delivery"]), "--reason", "bad input", "--as", me))
    letter = as_json(courier("pop", dead, "--as", me, "--json"))
    assert (letter["body"], letter["failure"]) == ("poison", "bad input")
    assert courier("pop", queue, "--as", me).returncode == 6  # the dedup id stored it once


def test_queue_limits_from_the_command_line(courier: Courier, unique: Unique) -> None:
    me, queue = unique("limits"), unique("small")
    ok(courier("register", me))
    ok(courier("queue", "create", queue, "--as", me))
    said = ok(courier("queue", "configure", queue, "--max-messages", "1", "--as", me))
    assert "max messages 1 (refuse beyond)" in said.stdout
    ok(courier("send", queue, "first", "--as", me))
    refused = courier("send", queue, "second", "--as", me)
    assert refused.returncode == 17 and "is full" in refused.stderr
    dropping = as_json(
        courier(
            "queue", "configure", queue, "--max-messages", "1", "--overflow", "drop_oldest",
            "--as", me, "--json",
        )
    )  # fmt: skip
    assert (dropping["max_messages"], dropping["overflow"]) == (1, "drop_oldest")
    ok(courier("send", queue, "second", "--as", me))
    assert as_json(courier("pop", queue, "--as", me, "--json"))["body"] == "second"


def test_queue_access_lists_from_the_command_line(courier: Courier, unique: Unique) -> None:
    owner, friend, stranger, queue = (
        unique("own"),
        unique("friend"),
        unique("stranger"),
        unique("q"),
    )
    for name in (owner, friend, stranger):
        ok(courier("register", name))
    ok(courier("queue", "create", queue, "--as", owner))
    assert (
        "may send: anyone; may read: anyone"
        in ok(courier("queue", "acl", queue, "--as", owner)).stdout
    )
    acl = as_json(courier("queue", "acl", queue, "--senders", friend, "--as", owner, "--json"))
    assert len(acl["senders"]) == 1 and acl["readers"] is None
    acl = as_json(courier("queue", "acl", queue, "--readers", f"{friend}", "--as", owner, "--json"))
    assert acl["senders"] == acl["readers"]  # --readers alone kept the send list
    assert "may send: client" in ok(courier("queue", "show", queue, "--as", owner)).stdout
    refused = courier("send", queue, "hi", "--as", stranger)
    assert refused.returncode != 0 and "send list" in refused.stderr
    assert courier("queue", "acl", queue, "--open", "--as", stranger).returncode != 0
    ok(courier("send", queue, "hi", "--as", friend))
    assert "read list" in courier("pop", queue, "--as", stranger).stderr
    ok(courier("queue", "acl", queue, "--open", "--as", owner))
    assert as_json(courier("pop", queue, "--as", stranger, "--json"))["body"] == "hi"
