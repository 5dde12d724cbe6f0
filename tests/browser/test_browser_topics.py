"""The topics page in a real browser: subscriptions with their backlogs, kept current."""

from __future__ import annotations

from browser_harness import Screenshot
from playwright.async_api import Page, expect

from courier.db import repository
from helpers.consoles import running_console


async def test_the_topics_page_shows_backlogs_and_follows_publishes(
    dsn: str, repo: repository.Repository, page: Page, screenshot: Screenshot
) -> None:
    bob = await repo.register_client("bob")
    instance = await repo.register_instance("127.0.0.1:1")
    await repo.create_topic("news", creator=bob.id)
    await repo.subscribe(bob.id, "news", instance_id=instance.id)
    await repo.publish(bob.id, "news", b"first")
    async with running_console(dsn, refresh_ms=500) as console:
        await page.goto(console.url + "/topics")
        row = page.locator("#topics tbody tr").filter(has_text="news:bob")
        await expect(row.locator("td").nth(4)).to_have_text("durable")
        await expect(row.locator("td").nth(6)).to_have_text("1")
        await repo.publish(bob.id, "news", b"second")
        await expect(row.locator("td").nth(6)).to_have_text("2")
        await screenshot(page, "topics")
        await row.locator("a", has_text="news:bob").click()
        await expect(page).to_have_url(
            f"{console.url}/queues/{(await repo.get_queue('news:bob')).id}"
        )
