"""RabbitMQ as the peer broker, with the guarantees a Courier send has.

Each client has its own channel with publisher confirms, and its own AMQP connection
up to ``MAX_CONNECTIONS`` per client process; beyond that clients share connections,
so a large level stays within the broker's default limit of 1,024 open files (past
it the broker fails every request until it is restarted). A send
publishes a persistent message (delivery_mode 2) to a durable queue and returns
once the broker has confirmed it; a pop is ``basic.get`` followed by the ack.
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

    async def send(self) -> None:
        message = aio_pika.Message(self.payload, delivery_mode=aio_pika.DeliveryMode.PERSISTENT)
        await self.exchange.publish(message, routing_key=self.queue.name)

    async def pop(self) -> bool:
        message = await self.queue.get(no_ack=False, fail=False)
        if message is None:
            return False
        await message.ack()
        return True


@dataclass(slots=True)
class RabbitMq:
    url: str
    prefix: str
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
            yield RabbitTarget(self.url, name)
        finally:
            await queue.delete(if_unused=False, if_empty=False)


def server_version(connection: aio_pika.abc.AbstractConnection) -> str:
    """The broker's version, as it announced it (empty if it did not)."""
    with contextlib.suppress(AttributeError):
        properties = connection.transport.connection.server_properties  # type: ignore[union-attr]
        return str(properties.get("version", ""))
    return ""
