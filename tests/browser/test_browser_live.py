"""Pages follow the system while it works: numbers and rows move without a reload."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from browser_harness import Screenshot
from playwright.async_api import Page, expect

from courier.db import repository
from helpers.consoles import running_console

SENDS_PER_SECOND = 40


@contextlib.asynccontextmanager
async def workload(dsn: str, queue_id: int, sender_id: int) -> AsyncIterator[list[int]]:
    """Send messages in the background (on its own pool) until the block ends."""
    repo = await repository.Repository.connect(dsn)
    sent: list[int] = []

    async def keep_sending() -> None:
        while True:
            sent.extend(await repo.send(sender_id, [queue_id], b"load %d" % len(sent)))
            await asyncio.sleep(1 / SENDS_PER_SECOND)

    task = asyncio.create_task(keep_sending())
    try:
        yield sent
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await repo.close()


async def test_overview_numbers_move_while_a_workload_runs(
    dsn: str, repo: repository.Repository, page: Page, screenshot: Screenshot
) -> None:
    client = await repo.register_client("loader")
    queue = await repo.create_queue("load")
    async with running_console(dsn, refresh_ms=500) as console:
        await page.goto(console.url + "/")
        await expect(page.locator("#messages-total")).to_have_text("0")
        await expect(page.locator("#sent-rate")).to_have_text("0.0")
        async with workload(dsn, queue.id, client.id) as sent:
            await page.wait_for_function(
                "() => Number(document.querySelector('#messages-total').dataset.value) >= 20"
            )
            await page.wait_for_function(
                "() => Number(document.querySelector('#sent-rate').dataset.value) > 5",
                timeout=15_000,
            )
            first = int(await page.locator("#messages-total").get_attribute("data-value") or 0)
            await page.wait_for_function(
                f"() => Number(document.querySelector('#messages-total').dataset.value) > {first}"
            )
            await expect(page.locator("#rates-chart polyline.sent")).to_have_count(1)
            await screenshot(page, "overview-live")
        assert len(sent) > first


async def test_a_queue_page_shows_new_messages_without_reload(
    dsn: str, repo: repository.Repository, page: Page
) -> None:
    client = await repo.register_client("writer")
    queue = await repo.create_queue("inbox")
    await repo.send(client.id, [queue.id], b"already there")
    async with running_console(dsn, refresh_ms=500) as console:
        await page.goto(f"{console.url}/queues/{queue.id}")
        await expect(page.locator("#messages tbody tr")).to_have_count(1)
        await repo.send(client.id, [queue.id], b"arrived later")
        await expect(page.locator("#messages tbody")).to_contain_text("arrived later")
        await expect(page.locator("#queue-messages")).to_have_text("2")
        popped = await repo.read(client.id, queue_id=queue.id, pop=True)
        assert popped.body == b"already there"
        await expect(page.locator("#messages tbody tr")).to_have_count(1)
        await expect(page.locator("#messages tbody")).not_to_contain_text("already there")


async def test_a_refresh_keeps_the_rows_of_a_table_that_did_not_change(
    dsn: str, repo: repository.Repository, page: Page
) -> None:
    bob = await repo.register_client("bob")
    instance = await repo.register_instance("127.0.0.1:1")
    await repo.create_topic("news", creator=bob.id)
    await repo.subscribe(bob.id, "news", instance_id=instance.id)
    async with running_console(dsn, refresh_ms=300) as console:
        await page.goto(console.url + "/topics")
        row = page.locator("#topics tbody tr").filter(has_text="news:bob")
        await expect(row.locator("td").nth(6)).to_have_text("0")
        await page.wait_for_timeout(700)  # the first refresh may restate the server's rows
        # A property, not an attribute: the rows are compared by their markup.
        await row.evaluate("(element) => { element.courierMarked = true; }")
        status = await page.locator("#live-status").text_content()
        await expect(page.locator("#live-status")).not_to_have_text(status or "", timeout=5_000)
        await page.wait_for_timeout(700)  # and a few more refreshes
        assert await row.evaluate("(element) => element.courierMarked === true")
        await repo.publish(bob.id, "news", b"first")
        await expect(row.locator("td").nth(6)).to_have_text("1")
        assert not await row.evaluate("(element) => element.courierMarked === true")
