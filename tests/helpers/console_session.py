"""A scripted Courier session, and what it must leave behind, worked out by hand.

The script runs through the real client library against real `courier serve`
processes; ``Expected`` records every message the script stored and removed, so a
test can compare the console's numbers with this bookkeeping and nothing else.
``scripted_session(servers)`` runs it on two servers for the block.

``dead_letters(repo, failures)`` makes dead letters straight through the repository:
each body is sent to a queue that allows one delivery, leased and failed.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import courier
from courier import models
from courier.db import repository
from helpers.servers import ServerProcess, address

# Markup to escape, and characters of more than one byte (so bytes and characters differ).
TRICKY_BODY = 'job two <script>alert("x")</script> & <b>bold</b>\nsecond line: naïve ✓'


@dataclass(frozen=True)
class Sent:
    id: int
    queue: str
    sender: str
    receiver: str | None
    priority: int
    context: int | None
    body: str  # sent as UTF-8


@dataclass
class Expected:
    client_ids: dict[str, int] = field(default_factory=dict)
    online: dict[str, int] = field(default_factory=dict)  # client -> index of its server
    queue_ids: dict[str, int] = field(default_factory=dict)
    stored: dict[int, Sent] = field(default_factory=dict)
    popped: list[int] = field(default_factory=list)

    def sent_by(self, client: str) -> list[int]:
        return sorted(m.id for m in self.stored.values() if m.sender == client)

    def waiting_for(self, client: str) -> list[int]:
        return sorted(m.id for m in self.stored.values() if m.receiver == client)

    def in_queue(self, queue: str) -> list[int]:
        return sorted(m.id for m in self.stored.values() if m.queue == queue)

    def by_name(self, name: str) -> Sent:
        return next(m for m in self.stored.values() if m.body == name)


class Script:
    """Runs the session; keeps its clients logged in until ``close``."""

    def __init__(self, servers: list[str]) -> None:
        self.servers = servers
        self.expected = Expected()
        self.clients: dict[str, courier.AsyncClient] = {}

    async def run(self) -> Expected:
        await self.register_everyone()
        await self.log_in()
        await self.create_queues()
        await self.send_and_pop()
        return self.expected

    async def register_everyone(self) -> None:
        async with courier.AsyncClient.connect(self.servers[0]) as anonymous:
            for name, mode in [
                ("alice", models.ClientMode.READ_WRITE),
                ("bob", models.ClientMode.READ_WRITE),
                ("carol", models.ClientMode.READ_ONLY),
                ("dave", models.ClientMode.READ_WRITE),
            ]:
                info = await anonymous.register(name, mode)
                self.expected.client_ids[name] = info.id

    async def log_in(self) -> None:
        # alice and bob on the first server, carol on the second, dave stays offline
        for name, server in [("alice", 0), ("bob", 0), ("carol", 1)]:
            self.clients[name] = await courier.AsyncClient.connect(self.servers[server], name=name)
            self.expected.online[name] = server

    async def create_queues(self) -> None:
        for name in ["jobs", "replies", "empty"]:
            queue = await self.clients["alice"].create_queue(name)
            self.expected.queue_ids[name] = queue.id

    async def send(
        self, sender: str, queues: list[str], body: str, *, receiver: str | None = None,
        priority: int = models.DEFAULT_PRIORITY, context: int | None = None,
    ) -> list[int]:  # fmt: skip
        receiver_id = self.expected.client_ids[receiver] if receiver else None
        ids = await self.clients[sender].send(
            queues, body, receiver=receiver_id, priority=priority, context=context
        )
        for queue, message_id in zip(queues, ids, strict=True):
            self.expected.stored[message_id] = Sent(
                message_id, queue, sender, receiver, priority, context, body
            )
        return ids

    async def send_and_pop(self) -> None:
        await self.send("alice", ["jobs"], "job one")
        await self.send("alice", ["jobs"], TRICKY_BODY, priority=9)
        await self.send("alice", ["jobs"], "for bob only", receiver="bob")
        await self.send("alice", ["jobs", "replies"], "to both queues", priority=3)
        await self.send("bob", ["replies"], "reply to alice", receiver="alice", context=42)
        await self.send("bob", ["jobs"], "bob's low job", priority=1)
        popped = await self.clients["bob"].pop("jobs")  # oldest visible to bob: "job one"
        assert popped is not None and popped.body == b"job one"
        del self.expected.stored[popped.id]
        self.expected.popped.append(popped.id)
        peeked = await self.clients["carol"].peek("jobs")  # a peek changes nothing
        assert peeked is not None

    async def close(self) -> None:
        for client in self.clients.values():
            await client.close()


@contextlib.asynccontextmanager
async def scripted_session(servers: list[ServerProcess]) -> AsyncIterator[Expected]:
    """Runs the script on two servers; its clients stay logged in until the block ends."""
    script = Script([address(server) for server in servers])
    try:
        yield await script.run()
    finally:
        await script.close()


@dataclass(frozen=True)
class DeadLetters:
    """Queue ``orders`` allows one delivery and sends its dead letters to ``dlq``;
    ``dead`` are the messages that failed there, in order."""

    reader: int
    orders: int
    dlq: int
    dead: list[int]


async def dead_letters(
    repo: repository.Repository, failures: list[tuple[bytes, str]], prefix: str = ""
) -> DeadLetters:
    """Queues ``{prefix}orders`` and ``{prefix}orders-dead``, and one dead letter per
    (body, reason): sent, leased by a worker and failed with the reason."""
    worker = await repo.register_client(f"{prefix}worker")
    orders = await repo.create_queue(f"{prefix}orders")
    dlq = await repo.create_queue(f"{prefix}orders-dead")
    await repo.configure_queue(
        models.QueueSettings(orders.id, max_deliveries=1, dead_letter_queue=dlq.id)
    )
    instance = await repo.register_instance("127.0.0.1:1")
    lease = repository.Lease(ms=30_000, instance_id=instance.id)
    dead = []
    for body, reason in failures:
        [message_id] = await repo.send(worker.id, [orders.id], body)
        taken = await repo.read(worker.id, queue_id=orders.id, pop=True, lease=lease)
        assert taken.id == message_id and taken.delivery is not None
        assert await repo.nack(worker.id, taken.delivery, reason=reason) == "dead"
        dead.append(message_id)
    return DeadLetters(worker.id, orders.id, dlq.id, dead)
