"""The console's cluster page: nodes, replicated queues with each member's clients,
length (read on the member's node) and rates, and the controller's decisions."""

from __future__ import annotations

import asyncio
import time
import urllib.parse
from collections.abc import AsyncIterator
from typing import Any

import pytest

from courier import config, controller, models
from courier.db import repository, routing
from courier.server import launcher
from helpers.cluster import two_nodes
from helpers.consoles import RunningConsole, StartConsole

P, C = models.Role.PRODUCER, models.Role.CONSUMER


@pytest.fixture
async def routed(dsn: str, empty_dsn: str) -> AsyncIterator[routing.RoutedBackend]:
    async with two_nodes(dsn, empty_dsn, capacity=6) as backend:
        yield backend


async def join(routed: routing.RoutedBackend, instance: int, name: str, role: models.Role) -> int:
    """A new client logged in through ``instance`` joins "orders"; its member."""
    client = await routed.register_client(name)
    await routed.login(client.id, instance)
    return (await routed.join_replicated("orders", client.id, instance, role)).member


def member_view(body: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (m["name"], m["member"], m["node"], m["queue_name"], m["producers"], m["consumers"],
         m["length"])
        for m in body["members"]["items"]
    ]  # fmt: skip


async def test_a_single_database_is_node_1_alone_with_nothing_replicated(
    dsn: str, repo: repository.Repository, console: RunningConsole
) -> None:
    await repo.create_queue("jobs")
    body = await console.get_json("/api/cluster")
    assert [
        (n["id"], n["state"], n["capacity"], n["queues"], n["error"]) for n in body["nodes"]
    ] == [(1, "active", None, 1, None)]
    assert body["members"] == {"items": [], "next_after": None, "scan_limited": False}
    assert body["decisions"] == []
    page = await console.http.get("/cluster")
    assert page.status_code == 200
    assert "No replicated queue." in page.text and "No decision yet." in page.text
    assert '<a href="/cluster" class="current">Cluster</a>' in page.text


async def test_members_show_clients_and_the_length_read_on_their_own_node(
    routed: routing.RoutedBackend, dsn: str, empty_dsn: str, start_console: StartConsole
) -> None:
    created = await routed.create_replicated_queue("orders", 2)
    instance = (await routed.control.register_instance("127.0.0.1:1")).id
    members = [await join(routed, instance, f"c{n}", role) for n, role in enumerate([P, C, C])]
    assert sorted(members) == [1, 1, 2]  # the balancer spreads them over both members
    sender = (await routed.register_client("sender")).id
    first, second = created.members
    for n in range(3):
        await routed.send(sender, [second.queue], f"m{n}".encode())
    await routed.send(sender, [first.queue], b"one")
    console = await start_console()

    body = await console.get_json("/api/cluster")
    assert [(n["id"], n["capacity"], n["queues"], n["error"]) for n in body["nodes"]] == [
        (1, None, 1, None),
        (2, 6, 1, None),
    ]
    producers = {m["member"]: m["producers"] for m in body["members"]["items"]}
    consumers = {m["member"]: m["consumers"] for m in body["members"]["items"]}
    assert sum(producers.values()) == 1 and sum(consumers.values()) == 2
    assert [row[:4] + row[6:] for row in member_view(body)] == [
        ("orders", 1, 1, "orders#1", 1),
        ("orders", 2, 2, "orders#2", 3),  # counted on node 2, where they are stored
    ]
    assert [m["queue_page"] for m in body["members"]["items"]] == [first.queue, None]
    page = await console.http.get("/cluster")
    assert f'href="/queues/{first.queue}"' in page.text
    assert f'href="/queues/{second.queue}"' not in page.text  # node 2's queue is not here
    shown = [n["dsn"] for n in body["nodes"]]
    assert shown == [config.redact_dsn(dsn), config.redact_dsn(empty_dsn)]
    password = urllib.parse.urlsplit(empty_dsn).password
    if password:  # the test server's DSNs carry one unless trust is set up
        assert password not in page.text and password not in str(body)


async def test_decisions_are_listed_newest_first(
    routed: routing.RoutedBackend, start_console: StartConsole
) -> None:
    await routed.create_replicated_queue("orders", 1)
    for kind, member, load in [("add", 2, 0.6), ("move", 1, 0.5)]:
        decision = controller.Decision(kind, member, 2, 7 if kind == "move" else 0, 5, 8, load, 40)
        await routed.control.record_decision("orders", decision)
    console = await start_console()
    body = await console.get_json("/api/cluster")
    assert [
        (d["replicated"], d["decision"], d["member"], d["node"], d["moved"], d["load"])
        for d in body["decisions"]
    ] == [("orders", "move", 1, 2, 7, 0.5), ("orders", "add", 2, 2, 0, 0.6)]
    page = await console.http.get("/cluster")
    assert (
        '<td class="num"><span data-bind="load" data-format="ratio">0.60</span></td>' in page.text
    )


async def test_a_node_out_of_reach_shows_its_error_and_its_members_length_unknown(
    dsn: str, repo: repository.Repository, start_console: StartConsole
) -> None:
    closed = f"postgresql://courier:s3cret@127.0.0.1:{launcher.free_port()}/courier"
    async with repo.pool.acquire() as connection:
        await connection.execute(
            "INSERT INTO courier_nodes (id, dsn) VALUES (1, $1), (3, $2)", dsn, closed
        )
        replicated = await connection.fetchval(
            "SELECT id FROM courier_create_replicated_v1('far', 'balanced', NULL, 1)"
        )
        await connection.execute(
            "SELECT courier_add_replica_v1($1, 1, $2, 'far#1', 3)", replicated, (2 << 48) + 1
        )
    console = await start_console()
    started = time.monotonic()
    body = await console.get_json("/api/cluster")
    assert time.monotonic() - started < 10
    unreachable = body["nodes"][1]
    assert unreachable["id"] == 3 and unreachable["dsn"].startswith("postgresql://courier:***@")
    assert unreachable["error"].startswith("cannot read postgresql://courier:***@")
    assert member_view(body) == [("far", 1, 3, "far#1", 0, 0, None)]
    page = await console.http.get("/cluster")
    assert "s3cret" not in page.text and "s3cret" not in str(body)
    assert "unknown" in page.text and "cannot read" in page.text


async def test_member_rates_are_the_change_of_the_reported_totals(
    routed: routing.RoutedBackend, start_console: StartConsole
) -> None:
    created = await routed.create_replicated_queue("orders", 2)
    queue = created.members[0].queue
    instance = (await routed.control.register_instance("127.0.0.1:1")).id
    await routed.control.report_counts(instance, {queue: (1000, 500)})
    console = await start_console(rate_interval_s=1.0)
    before = await console.get_json("/api/cluster")
    assert not before["members"]["items"][0]["produced_per_s"]  # no change seen yet
    await asyncio.sleep(1.5)
    await routed.control.report_counts(instance, {queue: (1100, 540)})
    row = await rates_of(console, queue)
    # 100 stored and 40 taken between two reads 1 to 5 s apart
    assert 100 / 6 <= row["produced_per_s"] <= 100
    assert row["consumed_per_s"] == pytest.approx(row["produced_per_s"] * 0.4)
    other = (await console.get_json("/api/cluster"))["members"]["items"][1]
    assert other["produced_per_s"] is None  # never reported


async def rates_of(console: RunningConsole, queue: int) -> dict[str, Any]:
    """The member's row once the console has seen its totals change."""
    for _ in range(50):
        body = await console.get_json("/api/cluster")
        row = next(m for m in body["members"]["items"] if m["queue"] == queue)
        if row["produced_per_s"]:
            return dict(row)
        await asyncio.sleep(0.2)
    raise AssertionError(f"no rate for member queue {queue}")


async def test_replicated_queues_are_paged_with_all_their_members(
    routed: routing.RoutedBackend, start_console: StartConsole
) -> None:
    first = await routed.create_replicated_queue("alpha", 2)
    await routed.create_replicated_queue("beta", 1)
    console = await start_console()
    page = await console.get_json("/api/cluster", limit=1)
    assert [(m["name"], m["member"]) for m in page["members"]["items"]] == [
        ("alpha", 1),
        ("alpha", 2),
    ]
    assert page["members"]["next_after"] == first.id
    rest = await console.get_json("/api/cluster", limit=1, after=first.id)
    assert [(m["name"], m["member"]) for m in rest["members"]["items"]] == [("beta", 1)]
    assert rest["members"]["next_after"] is None
    html = await console.http.get("/cluster", params={"limit": 1})
    assert f'href="/cluster?limit=1&amp;after={first.id}"' in html.text
