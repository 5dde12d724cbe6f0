"""Fixtures for the browser tests: the system Chromium driven by Playwright.

    browser      (session) headless Chromium from /usr/bin/chromium (`make chromium`
                 installs it; Playwright's own browser downloads are never used)
    page         (function) a fresh page in a fresh context (own cookies)
    screenshot   (function) ``await screenshot(page, "name")`` saves
                 test-artifacts/screenshots/name.png

The consoles themselves come from helpers.consoles.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from browser_harness import Screenshot
from playwright.async_api import Browser, Page, async_playwright

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Browser]:
    if not CHROMIUM.exists():  # noqa: ASYNC240 (one stat, before anything starts)
        pytest.fail(f"{CHROMIUM} is missing: run `make chromium` (apt-get install chromium)")
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield launched
        finally:
            await launched.close()


@pytest.fixture
async def page(browser: Browser) -> AsyncIterator[Page]:
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    opened = await context.new_page()
    opened.set_default_timeout(10_000)
    try:
        yield opened
    finally:
        await context.close()


@pytest.fixture
def screenshot() -> Screenshot:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    async def take(page: Page, name: str) -> Path:
        path = SCREENSHOTS / f"{name}.png"
        await page.screenshot(path=str(path), full_page=True)
        return path

    return take
