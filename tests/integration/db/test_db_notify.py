"""The courier_messages channel: one notification per statement, queue and receiver,
with how many messages it stored there, at commit."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from courier import errors, models
from courier.db import repository

CHANNEL = "courier_messages"


async def collect_notifications(dsn: str, action: object, *, settle: float = 0.2) -> list[str]:
    """Payloads received on the channel while `action` (a coroutine) runs."""
    payloads: list[str] = []
    listener = await asyncpg.connect(dsn)
    try:
        await listener.add_listener(CHANNEL, lambda *args: payloads.append(args[3]))
        await action  # type: ignore[misc]
        await asyncio.sleep(settle)
    finally:
        await listener.close()
    return payloads


async def test_each_copy_notifies_its_queue_and_receiver(
    dsn: str, repo: repository.Repository, writer: models.ClientInfo, reader: models.ClientInfo
) -> None:
    first = await repo.create_queue("first")
    second = await repo.create_queue("second")

    async def send_some() -> None:
        await repo.send(writer.id, [first.id, second.id], b"fan out", receiver=reader.id)
        await repo.send(writer.id, [second.id], b"for anyone")

    payloads = await collect_notifications(dsn, send_some())

    assert sorted(payloads) == sorted(
        [f"{first.id}:{reader.id}:1", f"{second.id}:{reader.id}:1", f"{second.id}::1"]
    )


async def test_a_batch_notifies_once_per_queue_and_receiver_with_its_count(
    dsn: str, repo: repository.Repository, writer: models.ClientInfo, reader: models.ClientInfo
) -> None:
    first = await repo.create_queue("first")
    second = await repo.create_queue("second")
    batch = [repository.SendRequest(writer.id, [first.id], b"a") for _ in range(3)]
    batch += [repository.SendRequest(writer.id, [first.id, second.id], b"b", receiver=reader.id)]

    payloads = await collect_notifications(dsn, repo.send_each(batch))

    assert sorted(payloads) == sorted(
        [f"{first.id}::3", f"{first.id}:{reader.id}:1", f"{second.id}:{reader.id}:1"]
    )


async def test_a_refused_send_notifies_nobody(
    dsn: str, repo: repository.Repository, writer: models.ClientInfo, queue: models.Queue
) -> None:
    async def refused() -> None:
        with pytest.raises(errors.QueueNotFound):
            await repo.send(writer.id, [queue.id, 999], b"never stored")

    assert await collect_notifications(dsn, refused()) == []
