"""Admin actions in the browser: refused without the token, done with it."""

from __future__ import annotations

import pytest
from browser_harness import Screenshot
from playwright.async_api import Page, expect

from courier import errors
from courier.db import repository
from helpers.consoles import running_console


async def queue_names(repo: repository.Repository) -> list[str]:
    return [queue.name for queue in await repo.list_queues()]


async def test_creating_a_queue_needs_the_token(
    dsn: str, repo: repository.Repository, page: Page, screenshot: Screenshot
) -> None:
    async with running_console(dsn) as console:
        await page.goto(console.url + "/queues")
        await page.fill("#create-queue input[name=name]", "made-in-browser")
        await page.click("#create-queue button")
        await expect(page.locator("h1")).to_have_text("Admin token needed")
        await screenshot(page, "admin-refused")
        assert await queue_names(repo) == []

        await page.goto(console.url + "/queues")
        await page.fill("#create-queue input[name=name]", "made-in-browser")
        await page.fill("#create-queue input[name=admin_token]", "not the token")
        await page.click("#create-queue button")
        await expect(page.locator("h1")).to_have_text("Admin token needed")
        assert await queue_names(repo) == []

        await page.goto(console.url + "/queues")
        await page.fill("#create-queue input[name=name]", "made-in-browser")
        await page.fill("#create-queue input[name=admin_token]", console.admin_token)
        await page.click("#create-queue button")
        await expect(page.locator("#queue-name")).to_have_text("made-in-browser")
        await expect(page.locator("#notice")).to_have_text("Queue created.")
        assert await queue_names(repo) == ["made-in-browser"]


async def test_signed_in_admin_deletes_a_message_and_a_queue(
    dsn: str, repo: repository.Repository, page: Page, screenshot: Screenshot
) -> None:
    client = await repo.register_client("alice")
    queue = await repo.create_queue("doomed")
    first, second = [(await repo.send(client.id, [queue.id], body))[0] for body in (b"a", b"b")]
    async with running_console(dsn) as console:
        await page.goto(f"{console.url}/messages/{first}")
        await page.click("#delete-message button")  # not signed in: refused
        await expect(page.locator("h1")).to_have_text("Admin token needed")
        assert (await repo.get_queue(queue.id)).message_count == 2

        await page.goto(console.url + "/admin")
        await page.fill("#sign-in input[name=admin_token]", "wrong")
        await page.click("#sign-in button")
        await expect(page.locator("h1")).to_have_text("Admin token needed")
        await page.goto(console.url + "/admin")
        await page.fill("#sign-in input[name=admin_token]", console.admin_token)
        await page.click("#sign-in button")
        await expect(page.locator("#admin-state")).to_contain_text("signed in")
        await screenshot(page, "admin-signed-in")

        await page.goto(f"{console.url}/messages/{first}")
        await expect(page.locator("#delete-message input[name=admin_token]")).to_have_count(0)
        await page.click("#delete-message button")
        await expect(page.locator("#queue-name")).to_have_text("doomed")
        await expect(page.locator("#messages tbody tr")).to_have_count(1)
        remaining = await repo.read(client.id, queue_id=queue.id)
        assert remaining.id == second

        await page.click("#delete-queue button")
        await expect(page.locator("h1")).to_have_text("Queues")
        await expect(page.locator("#queues tbody")).not_to_contain_text("doomed")
        with pytest.raises(errors.QueueNotFound):
            await repo.get_queue(queue.id)
