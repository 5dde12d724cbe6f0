"""``Client``: the blocking face of ``AsyncClient``, not a second implementation.

Each Client runs its own event loop in a daemon thread and owns an AsyncClient
living on that loop. Every public method is ``blocking(AsyncClient.method)``: it
submits the coroutine to the loop and waits for the result, so signatures,
docstrings and behaviour are the async client's own. A unit test checks that every
public coroutine method of AsyncClient appears here.

    with Client.connect("127.0.0.1:7400", name="alice", secret=secret) as client:
        client.send("jobs", "resize photo 17")
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar, Unpack

from courier import errors
from courier.client import async_client, replicated, transactions

P = ParamSpec("P")
R = TypeVar("R")


class LoopThread:
    """An event loop running for ever in a daemon thread, until ``stop``."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, R]) -> R:
        """Run ``coroutine`` on the loop and wait; Ctrl-C cancels it there too."""
        if self.loop.is_closed():
            coroutine.close()
            raise errors.ConnectionLost("the client is closed")
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


def blocking(
    method: Callable[Concatenate[async_client.AsyncClient, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[Client, P], R]:
    """The blocking twin of an AsyncClient coroutine method, generated."""

    def call(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._thread.run(method(self.async_client, *args, **kwargs))

    functools.update_wrapper(call, method)
    return call


class Client:
    """A blocking Courier client; see AsyncClient for what each method does."""

    def __init__(
        self, servers: async_client.Servers, **options: Unpack[async_client.ClientOptions]
    ) -> None:
        self._thread = LoopThread("courier-client")
        try:
            self.async_client = self._thread.run(_build(servers, options))
        except BaseException:
            self._thread.stop()
            raise

    @classmethod
    def connect(
        cls,
        servers: async_client.Servers,
        *,
        name: str | None = None,
        client_id: int | None = None,
        secret: str | None = None,
        **options: Unpack[async_client.ClientOptions],
    ) -> Client:
        """Connect (and log in when ``name`` or ``client_id`` is given, proving ``secret``)."""
        client = cls(servers, **options)
        try:
            client.open(name=name, client_id=client_id, secret=secret)
        except BaseException:
            client._thread.stop()
            raise
        return client

    @property
    def client_id(self) -> int | None:
        return self.async_client.client_id

    @property
    def name(self) -> str | None:
        return self.async_client.name

    @property
    def server(self) -> str | None:
        return self.async_client.server

    def close(self) -> None:
        """Log out, disconnect and stop the loop thread."""
        if self._thread.loop.is_closed():
            return
        try:
            self._thread.run(self.async_client.close())
        finally:
            self._thread.stop()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def transaction(self) -> Transaction:
        """A transaction (``with client.transaction() as tx: tx.send(...)``): sends,
        publishes and acks buffered, then committed all or none."""
        return Transaction(self._thread, self.async_client.transaction())

    def producer(self, name: str) -> Place:
        """Join a replicated queue as a producer (``AsyncClient.producer``)."""
        return Place(self._thread, self._thread.run(self.async_client.producer(name)))

    def consumer(self, name: str) -> Place:
        """Join a replicated queue as a consumer (``AsyncClient.consumer``)."""
        return Place(self._thread, self._thread.run(self.async_client.consumer(name)))

    open = blocking(async_client.AsyncClient.open)
    register = blocking(async_client.AsyncClient.register)
    login = blocking(async_client.AsyncClient.login)
    set_secret = blocking(async_client.AsyncClient.set_secret)
    disable_client = blocking(async_client.AsyncClient.disable_client)
    enable_client = blocking(async_client.AsyncClient.enable_client)
    get_client = blocking(async_client.AsyncClient.get_client)
    ping = blocking(async_client.AsyncClient.ping)
    clock_offset = blocking(async_client.AsyncClient.clock_offset)
    create_queue = blocking(async_client.AsyncClient.create_queue)
    delete_queue = blocking(async_client.AsyncClient.delete_queue)
    get_queue = blocking(async_client.AsyncClient.get_queue)
    list_queues = blocking(async_client.AsyncClient.list_queues)
    queues_for_me = blocking(async_client.AsyncClient.queues_for_me)
    send = blocking(async_client.AsyncClient.send)
    peek = blocking(async_client.AsyncClient.peek)
    pop = blocking(async_client.AsyncClient.pop)
    receive = blocking(async_client.AsyncClient.receive)
    request = blocking(async_client.AsyncClient.request)
    reply = blocking(async_client.AsyncClient.reply)
    ack = blocking(async_client.AsyncClient.ack)
    nack = blocking(async_client.AsyncClient.nack)
    extend = blocking(async_client.AsyncClient.extend)
    configure_queue = blocking(async_client.AsyncClient.configure_queue)
    set_queue_acl = blocking(async_client.AsyncClient.set_queue_acl)
    queue_acl = blocking(async_client.AsyncClient.queue_acl)
    send_many = blocking(async_client.AsyncClient.send_many)
    receive_many = blocking(async_client.AsyncClient.receive_many)
    pop_many = blocking(async_client.AsyncClient.pop_many)
    ack_many = blocking(async_client.AsyncClient.ack_many)
    nack_many = blocking(async_client.AsyncClient.nack_many)
    create_topic = blocking(async_client.AsyncClient.create_topic)
    delete_topic = blocking(async_client.AsyncClient.delete_topic)
    get_topic = blocking(async_client.AsyncClient.get_topic)
    list_topics = blocking(async_client.AsyncClient.list_topics)
    subscribe = blocking(async_client.AsyncClient.subscribe)
    unsubscribe = blocking(async_client.AsyncClient.unsubscribe)
    create_replicated_queue = blocking(async_client.AsyncClient.create_replicated_queue)
    get_replicated_queue = blocking(async_client.AsyncClient.get_replicated_queue)
    delete_replicated_queue = blocking(async_client.AsyncClient.delete_replicated_queue)
    publish = blocking(async_client.AsyncClient.publish)


class Transaction:
    """The blocking face of ``transactions.Transaction``: the operations are buffered
    as they are; commit and rollback run on the client's loop."""

    def __init__(self, thread: LoopThread, transaction: transactions.Transaction) -> None:
        self._thread = thread
        self.transaction = transaction
        self.send = transaction.send
        self.publish = transaction.publish
        self.ack = transaction.ack

    @property
    def results(self) -> list[list[int]] | None:
        return self.transaction.results

    def commit(self) -> list[list[int]]:
        return self._thread.run(self.transaction.commit())

    def rollback(self) -> None:
        self._thread.run(self.transaction.rollback())

    def __enter__(self) -> Transaction:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is None:
            self.commit()
        else:
            self.rollback()


async def _build(
    servers: async_client.Servers, options: async_client.ClientOptions
) -> async_client.AsyncClient:
    # Built on the loop thread, so everything asyncio inside belongs to that loop.
    return async_client.AsyncClient(servers, **options)


class Place:
    """The blocking twin of a producer's or consumer's place in a replicated queue:
    each of its coroutine methods (``send``, ``receive``, ``leave``, ...) blocks."""

    def __init__(self, thread: LoopThread, place: replicated.Place) -> None:
        self._thread = thread
        self.place = place

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.place, name)
        if not asyncio.iscoroutinefunction(found):
            return found

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._thread.run(found(*args, **kwargs))

        return functools.update_wrapper(call, found)

    def __enter__(self) -> Place:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._thread.run(self.place.leave())
