"""A console with a viewer token in the browser: nothing shows until the viewer
signs in, then the pages read and refresh themselves with the session cookie."""

from __future__ import annotations

from browser_harness import Screenshot
from playwright.async_api import Page, expect

from courier.db import repository
from helpers.consoles import running_console

VIEWER = "browser-viewer-token"


async def test_a_viewer_signs_in_and_the_overview_stays_live(
    dsn: str, repo: repository.Repository, page: Page, screenshot: Screenshot
) -> None:
    await repo.create_queue("first")
    async with running_console(dsn, viewer_token=VIEWER, refresh_ms=500) as console:
        await page.goto(console.url + "/")
        await expect(page.locator("h1")).to_have_text("Sign in needed")
        await expect(page.locator("#queues-total")).to_have_count(0)
        await screenshot(page, "viewer-sign-in-needed")

        await page.goto(console.url + "/admin")
        await page.fill("#view-sign-in input[name=viewer_token]", "wrong")
        await page.click("#view-sign-in button")
        await expect(page.locator("h1")).to_have_text("Wrong viewer token")

        await page.goto(console.url + "/admin")
        await page.fill("#view-sign-in input[name=viewer_token]", VIEWER)
        await page.click("#view-sign-in button")
        await expect(page.locator("#notice")).to_have_text("Signed in.")
        await expect(page.locator("#queues-total")).to_have_text("1")
        cookies = await page.context.cookies()
        assert [cookie["value"] for cookie in cookies if cookie["value"] == VIEWER] == []

        await repo.create_queue("second")  # the page's polls carry the session
        await expect(page.locator("#queues-total")).to_have_text("2")
        await expect(page.locator("#live-status")).to_have_attribute("data-ok", "true")
