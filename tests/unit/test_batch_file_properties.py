"""The CLI's .jsonl batches count properties towards the batch byte limit, the
messages' own or the --property ones they take."""

from __future__ import annotations

import json

import click
import pytest

from courier.cli import batch_files
from courier.client import Outgoing

LARGE = {"k": "v" * 16_000}  # 70 of them pass the 1 MiB batch limit; 65 do not


def test_a_message_s_own_properties_count_towards_its_batch() -> None:
    messages = [Outgoing("x", properties=LARGE) for _ in range(70)]
    assert [len(batch) for batch in batch_files.batches(messages)] == [65, 5]


def test_the_shared_properties_count_for_messages_without_their_own() -> None:
    messages = [Outgoing("x") for _ in range(69)] + [Outgoing("y", properties={})]
    assert [len(b) for b in batch_files.batches(messages, LARGE)] == [65, 5]
    assert [len(b) for b in batch_files.batches(messages)] == [70]


def test_a_line_s_properties_are_read_and_checked() -> None:
    line = json.dumps({"body": "b", "properties": {"trace": "t"}}).encode()
    assert batch_files.read_messages([line])[0].properties == {"trace": "t"}
    with pytest.raises(click.BadParameter, match=r"line 1: .*holds a NUL"):
        batch_files.read_messages([json.dumps({"body": "b", "properties": {"k": "\0"}}).encode()])
