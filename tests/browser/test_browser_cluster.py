"""The cluster page in a real browser: two nodes, a replicated queue's members with
their clients and lengths, kept current as messages arrive on the second node."""

from __future__ import annotations

from browser_harness import Screenshot
from playwright.async_api import Page, expect

from courier import controller, models
from courier.db import nodes, repository, routing
from helpers.consoles import running_console


async def test_the_cluster_page_shows_nodes_members_and_decisions(
    dsn: str, empty_dsn: str, page: Page, screenshot: Screenshot
) -> None:
    await nodes.add_node(dsn, empty_dsn, capacity=6)
    control = await repository.Repository.connect(dsn)
    second = await repository.Repository.connect(empty_dsn)
    try:
        routed = routing.RoutedBackend(control)
        routed.attach(2, second)
        created = await routed.create_replicated_queue("orders", 2)
        instance = (await control.register_instance("127.0.0.1:1")).id
        consumer = await routed.register_client("reader")
        await routed.login(consumer.id, instance)
        place = await routed.join_replicated("orders", consumer.id, instance, models.Role.CONSUMER)
        decision = controller.Decision("add", 2, 2, 0, 1, 14, 1 / 14, 0)
        await control.record_decision("orders", decision)
        far = created.members[1]
        sender = (await routed.register_client("sender")).id
        await routed.send(sender, [far.queue], b"first")
        async with running_console(dsn, refresh_ms=500) as console:
            await page.goto(console.url)
            await page.locator("nav a", has_text="Cluster").click()
            await expect(page).to_have_url(console.url + "/cluster")
            node_rows = page.locator("#nodes tbody tr")
            await expect(node_rows).to_have_count(2)
            await expect(node_rows.nth(1).locator("td").nth(2)).to_have_text("6")
            members = page.locator("#replicated tbody tr")
            await expect(members).to_have_count(2)
            on_two = members.filter(has_text="orders#2")
            await expect(on_two.locator("td").nth(3)).to_have_text("2")  # its node
            await expect(on_two.locator("td").nth(7)).to_have_text("1")  # read on node 2
            taken = members.nth(place.member - 1).locator("td").nth(6)
            await expect(taken).to_have_text("1")  # the consumer's member
            await routed.send(sender, [far.queue], b"second")
            await expect(on_two.locator("td").nth(7)).to_have_text("2")
            await expect(node_rows.nth(1).locator("td").nth(5)).to_have_text("none")  # reached
            decisions = page.locator("#decisions tbody tr")
            await expect(decisions).to_have_count(1)
            await expect(decisions.locator("td").nth(2)).to_have_text("add")
            await screenshot(page, "cluster")
            await members.filter(has_text="orders#1").locator("a", has_text="orders#1").click()
            await expect(page).to_have_url(f"{console.url}/queues/{created.members[0].queue}")
    finally:
        await control.close()
        await second.close()
