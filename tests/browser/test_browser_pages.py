"""Every page in a real browser after a scripted session through the client library."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from browser_harness import Screenshot
from playwright.async_api import Page, expect

from helpers.console_session import TRICKY_BODY, Expected, scripted_session
from helpers.consoles import RunningConsole, running_console
from helpers.servers import ServerProcess


@dataclass
class Session:
    console: RunningConsole
    expected: Expected


@pytest.fixture(scope="module")
async def session(module_dsn: str, servers: list[ServerProcess]) -> AsyncIterator[Session]:
    async with (
        scripted_session(servers) as expected,
        running_console(module_dsn, refresh_ms=1000) as console,
    ):
        yield Session(console, expected)


def row_of(page: Page, table: str, text: str) -> Any:
    return page.locator(f"{table} tbody tr").filter(has_text=text)


async def test_overview(session: Session, page: Page, screenshot: Screenshot) -> None:
    await page.goto(session.console.url + "/")
    await expect(page.locator("#clients-total")).to_have_text("4")
    await expect(page.locator("#clients-online")).to_have_text("3")
    await expect(page.locator("#queues-total")).to_have_text("3")
    await expect(page.locator("#messages-total")).to_have_text("6")
    await expect(page.locator("#instances tbody tr")).to_have_count(2)
    clients_per_instance = await page.locator(
        "#instances tbody tr td:nth-child(5)"
    ).all_inner_texts()
    assert sorted(clients_per_instance) == ["1", "2"]
    await expect(page.locator("#rates-chart polyline.sent")).to_have_count(1, timeout=8000)
    await expect(page.locator("#live-status")).to_contain_text("live")
    await screenshot(page, "overview")


async def test_clients(session: Session, page: Page, screenshot: Screenshot) -> None:
    await page.goto(session.console.url + "/clients")
    await expect(page.locator("#clients tbody tr")).to_have_count(4)
    alice = row_of(page, "#clients", "alice")
    await expect(alice.locator("td").nth(2)).to_have_text("online")
    await expect(alice.locator("td").nth(4)).to_have_text("4")  # sent, still stored
    await expect(alice.locator("td").nth(5)).to_have_text("1")  # waiting for alice
    await expect(row_of(page, "#clients", "dave").locator("td").nth(2)).to_have_text("offline")
    await screenshot(page, "clients")
    await page.fill("input[name=q]", "CAR")
    await page.press("input[name=q]", "Enter")
    await expect(page.locator("#clients tbody tr")).to_have_count(1)
    await expect(page.locator("#clients tbody")).to_contain_text("carol")


async def test_client_page(session: Session, page: Page, screenshot: Screenshot) -> None:
    await page.goto(session.console.url + "/clients")
    await page.click("#clients a:text-is('alice')")
    await expect(page.locator("#client-name")).to_have_text("alice")
    await expect(page.locator("#client-sent")).to_have_text("4")
    await expect(page.locator("#waiting tbody tr")).to_have_count(1)
    await expect(page.locator("#waiting tbody")).to_contain_text("reply to alice")
    await expect(page.locator("#sent tbody tr")).to_have_count(4)
    await screenshot(page, "client")


async def test_queues_and_a_queue(session: Session, page: Page, screenshot: Screenshot) -> None:
    await page.goto(session.console.url + "/queues")
    for name, count in [("jobs", "4"), ("replies", "2"), ("empty", "0")]:
        await expect(row_of(page, "#queues", name).locator("td").nth(2)).to_have_text(count)
    empty = row_of(page, "#queues", "empty").locator("td")
    await expect(empty.nth(3)).to_have_text("0")  # leased
    await expect(empty.nth(4)).to_have_text("0")  # delayed
    await expect(empty.nth(5)).to_have_text("\u2014")  # no oldest message
    await expect(empty.nth(7)).to_have_text("no limit")  # max deliveries
    await screenshot(page, "queues")
    await page.click("#queues a:text-is('jobs')")
    await expect(page.locator("#queue-name")).to_have_text("jobs")
    await expect(page.locator("#messages tbody tr")).to_have_count(4)
    await screenshot(page, "queue")
    await page.fill("#filters input[name=priority]", "9")
    await page.click("#filters button")
    await expect(page.locator("#messages tbody tr")).to_have_count(1)
    shown = await page.locator("#messages td.preview").inner_text()
    assert shown.startswith('job two <script>alert("x")</script> & <b>bold</b>')
    await screenshot(page, "queue-filtered")


async def test_message_page_shows_the_body_as_text(
    session: Session, page: Page, screenshot: Screenshot
) -> None:
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: dialogs.append(dialog.message))
    message_id = session.expected.by_name(TRICKY_BODY).id
    await page.goto(f"{session.console.url}/messages/{message_id}")
    assert await page.locator("#message-body").inner_text() == TRICKY_BODY
    await expect(page.locator("#message-fields")).to_contain_text("alice")
    await expect(page.locator("#message-body b")).to_have_count(0)  # not parsed as markup
    await page.wait_for_timeout(1500)  # a refresh cycle later, still text
    assert dialogs == []
    await screenshot(page, "message")


async def test_admin_page(session: Session, page: Page, screenshot: Screenshot) -> None:
    await page.goto(session.console.url + "/admin")
    await expect(page.locator("#sign-in")).to_be_visible()
    await screenshot(page, "admin")
