"""Under its Content-Security-Policy the console still works in a real browser: the
scripts run (the chart draws, numbers fill in) and nothing is blocked."""

from __future__ import annotations

from playwright.async_api import ConsoleMessage, Page, expect

from courier.db import repository
from helpers.consoles import running_console


async def test_pages_work_under_the_policy_with_nothing_blocked(
    dsn: str, repo: repository.Repository, page: Page
) -> None:
    client = await repo.register_client("alice")
    queue = await repo.create_queue("jobs")
    await repo.send(client.id, [queue.id], b"hello")
    complaints: list[str] = []

    def listen(message: ConsoleMessage) -> None:
        if message.type == "error":
            complaints.append(message.text)

    page.on("console", listen)
    async with running_console(dsn) as console:
        response = await page.goto(console.url + "/")
        assert response is not None and "content-security-policy" in response.headers
        # rates.js draws the chart: its lines exist only if the script ran.
        await expect(page.locator("#rates-chart polyline").first).to_be_attached(timeout=10_000)
        await page.goto(console.url + f"/queues/{queue.id}")
        await expect(page.locator("#live-status")).to_have_text("live")
        await page.goto(console.url + "/admin")
        await page.fill("#sign-in input[name=admin_token]", console.admin_token)
        await page.click("#sign-in button")
        await expect(page.locator("#notice")).to_have_text("Signed in as admin.")
        await page.goto(console.url + "/queues")
        await page.fill("#create-queue input[name=name]", "made-with-csrf")
        await page.click("#create-queue button")
        await expect(page.locator("#notice")).to_have_text("Queue created.")
    assert [text for text in complaints if "Content Security Policy" in text] == []
    assert "made-with-csrf" in [q.name for q in await repo.list_queues()]
