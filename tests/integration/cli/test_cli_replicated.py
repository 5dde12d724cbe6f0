"""`courier replicated`, run as subprocesses against real servers on one database."""

from __future__ import annotations

from typing import Any

from cli_results import as_json, ok

from helpers.names import Unique

Courier = Any  # conftest.CourierCLI


def test_a_replicated_queue_is_created_shown_and_deleted(courier: Courier, unique: Unique) -> None:
    alice, orders = unique("alice"), unique("orders")
    ok(courier("register", alice))
    made = as_json(
        courier("replicated", "create", orders, "--replicas", "1", "--as", alice, "--json")
    )
    assert (made["name"], made["policy"]) == (orders, "balanced")
    assert [(m["member"], m["node"], m["queue_name"]) for m in made["members"]] == [
        (1, 1, f"{orders}#1")
    ]
    ok(courier("send", f"{orders}#1", "hello", "--as", alice))
    table = ok(courier("replicated", "show", orders, "--as", alice)).stdout
    assert f"{orders}#1" in table and "balanced" in table
    shown = as_json(courier("replicated", "show", orders, "--as", alice, "--json"))
    assert shown["members"][0]["length"] == 1
    ok(courier("replicated", "delete", orders, "--as", alice))
    gone = courier("replicated", "show", orders, "--as", alice)
    assert gone.returncode != 0 and "does not exist" in gone.stderr


def test_more_members_than_nodes_is_refused_with_the_reason(
    courier: Courier, unique: Unique
) -> None:
    alice = unique("alice")
    ok(courier("register", alice))
    refused = courier("replicated", "create", unique("wide"), "--replicas", "2", "--as", alice)
    assert refused.returncode != 0
    assert "2 members needs as many nodes; the cluster has 1" in refused.stderr
