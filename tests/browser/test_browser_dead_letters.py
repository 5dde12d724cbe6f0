"""Dead letters and binary bodies in a real browser: shown, refreshed in place, and
moved back by the admin, a whole queue or one row at a time."""

from __future__ import annotations

from typing import Any

from browser_harness import Screenshot
from playwright.async_api import Page, expect

from courier.db import repository
from helpers.console_session import dead_letters
from helpers.consoles import running_console

BINARY = b"\x00\xffcannot parse\x80"


async def queues_of(repo: repository.Repository, message_ids: list[int]) -> list[Any]:
    """(queue, deliveries, dead_from) of each message, straight from the table."""
    records = await repo.pool.fetch(
        "SELECT queue_id, deliveries, dead_from FROM courier_messages"
        " WHERE id = ANY($1) ORDER BY id",
        message_ids,
    )
    return [tuple(record) for record in records]


def watch_errors(page: Page) -> list[str]:
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    return errors


async def test_a_binary_dead_letter_is_shown_as_hex(
    dsn: str, repo: repository.Repository, page: Page, screenshot: Screenshot
) -> None:
    dead = await dead_letters(repo, [(BINARY, "boom <b>not markup</b>")])
    errors = watch_errors(page)
    async with running_console(dsn, refresh_ms=500) as console:
        await page.goto(f"{console.url}/queues/{dead.dlq}")
        row = page.locator("#messages tbody tr").first
        await expect(row.locator(".badge.binary")).to_be_visible()
        await expect(row.locator("td.preview")).to_contain_text("00 ff 63 61 6e")
        await expect(row.locator("td.failure")).to_contain_text("dead letter from orders")
        await expect(row.locator("td.failure")).to_contain_text("boom <b>not markup</b>")
        await page.wait_for_timeout(1200)  # refreshed from the API since, still the same
        await expect(row.locator(".badge.binary")).to_be_visible()
        await expect(row.locator("td.failure b")).to_have_count(0)
        await screenshot(page, "dead-letter-queue")

        await row.locator("a[href^='/messages/']").click()
        await expect(page.locator("#message-size")).to_contain_text("15 bytes, binary")
        dump = await page.locator("#message-body").inner_text()
        assert dump == (
            "00000000  00 ff 63 61 6e 6e 6f 74  20 70 61 72 73 65 80     |..cannot parse.|"
        )
        await expect(page.locator("#message-dead-from")).to_contain_text("orders")
        await expect(page.locator("#message-failure")).to_have_text("boom <b>not markup</b>")
        await expect(page.locator("#message-deliveries")).to_have_text("1")
        await screenshot(page, "dead-letter")
    assert errors == []


async def test_redrive_moves_every_dead_letter_back(
    dsn: str, repo: repository.Repository, page: Page, screenshot: Screenshot
) -> None:
    dead = await dead_letters(repo, [(b"first", "boom"), (BINARY, "bad bytes")])
    async with running_console(dsn) as console:
        await page.goto(f"{console.url}/queues/{dead.dlq}")
        await expect(page.locator("#messages tbody tr")).to_have_count(2)
        await expect(page.locator("#messages form.row-action")).to_have_count(0)  # not admin
        await page.click("#redrive button")
        await expect(page.locator("h1")).to_have_text("Admin token needed")
        assert [row[0] for row in await queues_of(repo, dead.dead)] == [dead.dlq] * 2

        await page.goto(f"{console.url}/queues/{dead.dlq}")
        await page.fill("#redrive input[name=admin_token]", console.admin_token)
        await page.click("#redrive button")
        await expect(page.locator("#notice")).to_have_text(
            "Dead letters moved back to the queues they failed in: 2."
        )
        await expect(page.locator("#messages tbody")).to_contain_text("No message matches.")
        await screenshot(page, "redriven")
        assert await queues_of(repo, dead.dead) == [(dead.orders, 0, None)] * 2


async def test_move_back_one_row_even_one_that_arrived_after_loading(
    dsn: str, repo: repository.Repository, page: Page, screenshot: Screenshot
) -> None:
    dead = await dead_letters(repo, [(b"early", "boom")])
    async with running_console(dsn, refresh_ms=500) as console:
        await page.goto(console.url + "/admin")
        await page.fill("#sign-in input[name=admin_token]", console.admin_token)
        await page.click("#sign-in button")
        await expect(page.locator("#admin-state")).to_contain_text("signed in")

        await page.goto(f"{console.url}/queues/{dead.dlq}")
        [plain] = await repo.send(dead.reader, [dead.dlq], b"not a dead letter")
        later = await fail_another(repo, dead.reader, dead.orders, b"late")
        rows = page.locator("#messages tbody tr")
        await expect(rows).to_have_count(3)  # the two new ones came with a refresh
        await expect(rows.filter(has_text="not a dead letter").locator("form")).to_be_hidden()
        late_row = rows.filter(has_text="late")
        await screenshot(page, "dead-letter-queue-admin")
        await late_row.get_by_role("button", name="Move back").click()
        await expect(page.locator("#notice")).to_contain_text("moved back")
        await expect(rows).to_have_count(2)
        assert await queues_of(repo, [*dead.dead, later, plain]) == [
            (dead.dlq, 1, dead.orders),
            (dead.dlq, 0, None),
            (dead.orders, 0, None),
        ]


async def fail_another(repo: repository.Repository, reader: int, queue: int, body: bytes) -> int:
    """One more dead letter from queue (which allows one delivery)."""
    [message_id] = await repo.send(reader, [queue], body)
    instance = await repo.register_instance("127.0.0.1:2")
    lease = repository.Lease(ms=30_000, instance_id=instance.id)
    taken = await repo.read(reader, queue_id=queue, pop=True, lease=lease)
    assert taken.id == message_id and taken.delivery is not None
    assert await repo.nack(reader, taken.delivery, reason="late failure") == "dead"
    return message_id
