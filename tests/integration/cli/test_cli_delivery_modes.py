"""Delivery modes from the command line: send and publish --non-persistent, and the
.jsonl field persistent, each stored where its mode says."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from cli_results import as_json, ok

from helpers import storage
from helpers.names import Unique

Courier = Any  # conftest.CourierCLI


def persistence(dsn: str, queue_name: str) -> dict[str, bool]:
    """Each ready message of the queue as text, and whether it is persistent."""
    found = asyncio.run(storage.persistence(dsn, queue_name))
    return {body.decode(): persistent for body, persistent in found.items()}


def test_send_non_persistent_skips_the_log_and_reads_as_any_message(
    courier: Courier, unique: Unique, module_dsn: str
) -> None:
    me, queue = unique("modes"), unique("jobs")
    ok(courier("register", me))
    ok(courier("queue", "create", queue, "--as", me))
    ok(courier("send", queue, "quick", "--non-persistent", "--as", me))
    ok(courier("send", queue, "kept", "--as", me))
    assert persistence(module_dsn, queue) == {"quick": False, "kept": True}
    taken = as_json(courier("receive", queue, "--max", "10", "--as", me, "--json"))
    assert [m["body"] for m in taken] == ["quick", "kept"]


def test_publish_non_persistent_makes_every_copy_non_persistent(
    courier: Courier, unique: Unique, module_dsn: str
) -> None:
    me, news = unique("publisher"), unique("news")
    ok(courier("register", me))
    ok(courier("topic", "create", news, "--as", me))
    ok(courier("subscribe", news, "--as", me))
    ok(courier("publish", news, "flash", "--non-persistent", "--as", me))
    assert persistence(module_dsn, f"{news}:{me}") == {"flash": False}


def test_jsonl_lines_choose_their_mode_and_a_wrong_value_is_named(
    courier: Courier, unique: Unique, module_dsn: str, tmp_path: Path
) -> None:
    me, queue = unique("bulk-modes"), unique("jobs")
    ok(courier("register", me))
    ok(courier("queue", "create", queue, "--as", me))
    source = tmp_path / "messages.jsonl"
    source.write_text(
        json.dumps({"body": "a", "persistent": True}) + "\n"
        + json.dumps("b") + "\n"
        + json.dumps({"body": "c", "persistent": False}) + "\n"
    )  # fmt: skip
    ok(courier("send", queue, "--file", str(source), "--non-persistent", "--as", me))
    # A line's own choice wins over the option's.
    assert persistence(module_dsn, queue) == {"a": True, "b": False, "c": False}

    source.write_text('"fine"\n{"body": "x", "persistent": "no"}\n')
    wrong = courier("send", queue, "--file", str(source), "--as", me)
    assert wrong.returncode == 2 and "line 2" in wrong.stderr, wrong.stderr
    assert 'persistent is true or false, not "no"' in wrong.stderr, wrong.stderr
