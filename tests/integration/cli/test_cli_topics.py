"""The topic commands, run as subprocesses against real servers."""

from __future__ import annotations

import json
import time
from typing import Any

from cli_results import as_json, ok

from helpers.names import Unique

Courier = Any  # conftest.CourierCLI


def test_publish_reaches_a_durable_subscription_read_as_a_queue(
    courier: Courier, unique: Unique
) -> None:
    alice, bob, news = unique("alice"), unique("bob"), unique("news")
    for name in (alice, bob):
        ok(courier("register", name))
    created = as_json(courier("topic", "create", news, "--as", alice, "--json"))
    assert created["name"] == news
    made = as_json(courier("subscribe", news, "--as", bob, "--json"))
    assert (made["queue_name"], made["durable"]) == (f"{news}:{bob}", True)
    published = as_json(courier("publish", news, "extra! extra!", "--as", alice, "--json"))
    assert list(published["copies"]) == [str(made["queue"])]
    said = ok(courier("publish", news, "extra!", "--as", alice)).stdout
    assert said.startswith("published 1 copy: message ")
    listed = as_json(courier("topic", "list", "--as", alice, "--json"))
    (mine,) = [topic for topic in listed if topic["name"] == news]
    assert [s["backlog"] for s in mine["subscriptions"]] == [2]
    table = ok(courier("topic", "show", news, "--as", alice)).stdout
    assert f"{news}:{bob}" in table and "durable" in table
    assert "extra! extra!" in ok(courier("receive", f"{news}:{bob}", "--as", bob)).stdout
    ok(courier("unsubscribe", f"{news}:{bob}", "--as", bob))
    said = ok(courier("publish", news, "again", "--as", alice)).stdout
    assert "no subscription" in said


def test_topic_errors_have_their_exit_codes(courier: Courier, unique: Unique) -> None:
    me, news = unique("owner"), unique("news")
    ok(courier("register", me))
    missing = courier("publish", news, "hi", "--as", me)
    assert missing.returncode == 19 and f"topic {news} does not exist" in missing.stderr
    ok(courier("topic", "create", news, "--as", me))
    assert courier("topic", "create", news, "--as", me).returncode == 20
    ok(courier("register", stranger := unique("stranger")))
    refused = courier("topic", "delete", news, "--as", stranger)
    assert refused.returncode == 12, refused.stderr  # NotAuthorised
    assert f"only the owner of topic {news} or an admin may delete it" in refused.stderr
    ok(courier("topic", "delete", news, "--as", me))
    assert courier("topic", "show", news, "--as", me).returncode == 19


def test_a_non_durable_subscriber_follows_then_leaves(courier: Courier, unique: Unique) -> None:
    me, ear, news = unique("owner"), unique("ear"), unique("news")
    for name in (me, ear):
        ok(courier("register", name))
    ok(courier("topic", "create", news, "--as", me))
    listener = courier.spawn(
        "subscribe", news, "--non-durable", "--count", "1", "--as", ear, "--json"
    )
    deadline = time.monotonic() + 20
    while not as_json(courier("topic", "show", news, "--as", me, "--json"))["subscriptions"]:
        assert time.monotonic() < deadline and listener.poll() is None
        time.sleep(0.2)
    ok(courier("publish", news, "heard", "--as", me))
    out, err = listener.communicate(timeout=30)
    assert listener.returncode == 0, err
    subscription, message = (json.loads(line) for line in out.splitlines())
    assert subscription["durable"] is False and message["body"] == "heard"
    assert as_json(courier("topic", "show", news, "--as", me, "--json"))["subscriptions"] == []
