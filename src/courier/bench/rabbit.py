"""RabbitMQ as the peer broker, with the guarantees a Courier send has.

Each client has its own channel with publisher confirms, and its own AMQP connection
up to ``MAX_CONNECTIONS`` per client process; beyond that clients share connections,
so a large level stays within the broker's default limit of 1,024 open files (past
it the broker fails every request until it is restarted). A send
publishes a persistent message (delivery_mode 2) to a durable queue and returns
once the broker has confirmed it; a pop is ``basic.get`` followed by the ack.
With batches (``--batch B``) the nearest equivalent: a send publishes B messages at
once and returns when all B are confirmed, and each client consumes with a prefetch
of B, a pop taking what has arrived (up to B, waiting up to a second for the first)
and acknowledging it with one multiple ack.
When the broker cannot be reached the system is skipped, saying so.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import urllib.parse
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import aio_pika
import aio_pika.abc
import aio_pika.exceptions

from courier.bench import defaults, loop, peers

CONNECT_TIMEOUT_S = 5.0
BATCH_POP_WAIT_S = 1.0
"""How long a batch pop waits for its first message before it counts as empty."""
MAX_CONNECTIONS = 128
"""AMQP connections one client process opens at most."""
UNREACHABLE = (OSError, asyncio.TimeoutError, aio_pika.exceptions.AMQPError)


def quiet_library_logs() -> None:
    """aiormq logs the failures that this module reports (or counts) itself."""
    logging.getLogger("aiormq").setLevel(logging.CRITICAL)


def shown(url: str) -> str:
    """The URL without its password, for output and results."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


@dataclass(frozen=True, slots=True)
class RabbitTarget:
    url: str
    queue: str
    batch: int = 1

    async def open(
        self, clients: Sequence[int], body: str, stack: contextlib.AsyncExitStack
    ) -> list[loop.Peer]:
        payload = body.encode()
        quiet_library_logs()

        async def connect() -> aio_pika.abc.AbstractConnection:
            connection = await aio_pika.connect(self.url, timeout=CONNECT_TIMEOUT_S)
            stack.push_async_callback(connection.close)
            return connection

        async def open_peer(connection: aio_pika.abc.AbstractConnection) -> loop.Peer:
            channel = await connection.channel(publisher_confirms=True)
            queue = await channel.declare_queue(self.queue, durable=True)
            if self.batch > 1:
                return await RabbitBatchPeer.consuming(channel, queue, payload, self.batch)
            return RabbitPeer(channel.default_exchange, queue, payload)

        count = min(len(clients), MAX_CONNECTIONS)
        connections = await asyncio.gather(*(connect() for _ in range(count)))
        peers = [open_peer(connections[n % count]) for n in range(len(clients))]
        return list(await asyncio.gather(*peers))


@dataclass(frozen=True, slots=True)
class RabbitPeer:
    exchange: aio_pika.abc.AbstractExchange
    queue: aio_pika.abc.AbstractQueue
    payload: bytes

    async def send(self) -> int:
        message = aio_pika.Message(self.payload, delivery_mode=aio_pika.DeliveryMode.PERSISTENT)
        await self.exchange.publish(message, routing_key=self.queue.name)
        return 1

    async def pop(self) -> int:
        message = await self.queue.get(no_ack=False, fail=False)
        if message is None:
            return 0
        await message.ack()
        return 1


@dataclass(frozen=True, slots=True)
class RabbitBatchPeer:
    """Publishes a batch with confirms; consumes with a prefetch of one batch."""

    exchange: aio_pika.abc.AbstractExchange
    queue: aio_pika.abc.AbstractQueue
    payload: bytes
    batch: int
    inbox: asyncio.Queue[aio_pika.abc.AbstractIncomingMessage]

    @classmethod
    async def consuming(
        cls,
        channel: aio_pika.abc.AbstractChannel,
        queue: aio_pika.abc.AbstractQueue,
        payload: bytes,
        batch: int,
    ) -> RabbitBatchPeer:
        await channel.set_qos(prefetch_count=batch)
        inbox: asyncio.Queue[aio_pika.abc.AbstractIncomingMessage] = asyncio.Queue()

        async def arrived(message: aio_pika.abc.AbstractIncomingMessage) -> None:
            inbox.put_nowait(message)

        await queue.consume(arrived, no_ack=False)
        return cls(channel.default_exchange, queue, payload, batch, inbox)

    async def send(self) -> int:
        def message() -> aio_pika.Message:
            return aio_pika.Message(self.payload, delivery_mode=aio_pika.DeliveryMode.PERSISTENT)

        await asyncio.gather(*(
            self.exchange.publish(message(), routing_key=self.queue.name)
            for _ in range(self.batch)
        ))  # fmt: skip
        return self.batch

    async def pop(self) -> int:
        try:
            taken = [await asyncio.wait_for(self.inbox.get(), BATCH_POP_WAIT_S)]
        except TimeoutError:
            return 0
        while len(taken) < self.batch and not self.inbox.empty():
            taken.append(self.inbox.get_nowait())
        await taken[-1].ack(multiple=True)
        return len(taken)


@dataclass(slots=True)
class RabbitMq:
    url: str
    prefix: str
    batch: int = 1
    name: str = defaults.RABBITMQ
    version: str = ""
    _channel: aio_pika.abc.AbstractChannel | None = None

    @contextlib.asynccontextmanager
    async def running(self, most_clients: int) -> AsyncIterator[None]:
        quiet_library_logs()
        try:
            connection = await aio_pika.connect(self.url, timeout=CONNECT_TIMEOUT_S)
        except UNREACHABLE as exc:
            raise peers.Skipped(
                f"RabbitMQ: not reachable at {shown(self.url)}, skipped ({exc})"
            ) from exc
        async with connection:
            self.version = server_version(connection)
            self._channel = await connection.channel()
            try:
                yield
            finally:
                self._channel = None

    @contextlib.asynccontextmanager
    async def level(self, clients: int) -> AsyncIterator[loop.Target]:
        assert self._channel is not None, "level() inside running() only"
        name = f"{self.prefix}-{clients}"
        try:
            queue = await self._channel.declare_queue(name, durable=True)
        except UNREACHABLE as exc:
            # A broker that answers but fails (say, out of file descriptors) is
            # reported like one that cannot be reached, and the sweep goes on.
            raise peers.Skipped(
                f"RabbitMQ at {shown(self.url)} failed to declare a queue, skipped ({exc!r})"
            ) from exc
        try:
            yield RabbitTarget(self.url, name, self.batch)
        finally:
            await queue.delete(if_unused=False, if_empty=False)


def server_version(connection: aio_pika.abc.AbstractConnection) -> str:
    """The broker's version, as it announced it (empty if it did not)."""
    with contextlib.suppress(AttributeError):
        properties = connection.transport.connection.server_properties  # type: ignore[union-attr]
        return str(properties.get("version", ""))
    return ""
