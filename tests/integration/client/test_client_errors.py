"""Every error class, raised through AsyncClient and Client alike, with useful messages."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from client_harness import Connect, logged_in, register

import courier
from courier import errors, models, protocol
from courier.client import connection
from courier.protocol.constants import HEADER
from helpers.names import Unique
from helpers.servers import ServerProcess, StartServer, address, closed_port_address


@pytest.fixture
async def client(connect: Connect, servers: list[ServerProcess], unique: Unique) -> Any:
    return await logged_in(connect, servers[0], unique("alice"))


async def test_queue_not_found_names_the_queue(client: Any) -> None:
    with pytest.raises(errors.QueueNotFound, match="queue 'nope' does not exist"):
        await client.pop("nope")
    missing = 2**40
    for call in (
        client.get_queue(missing),
        client.peek(missing),
        client.send(missing, "x"),
        client.receive(missing, timeout=0),
        client.delete_queue(missing),
        client.request(missing, "x", timeout=1),
    ):
        with pytest.raises(errors.QueueNotFound, match=f"queue {missing} does not exist"):
            await call


async def test_queue_exists(client: Any, unique: Unique) -> None:
    name = unique("q")
    await client.create_queue(name)
    with pytest.raises(errors.QueueExists, match=f"queue '{name}' already exists"):
        await client.create_queue(name)


async def test_queue_not_empty(client: Any, unique: Unique) -> None:
    queue = await client.create_queue(unique("q"))
    await client.send(queue, "keep me")
    with pytest.raises(errors.QueueNotEmpty, match="is not empty"):
        await client.delete_queue(queue.name, if_empty=True)
    assert (await client.get_queue(queue.id)).message_count == 1
    await client.delete_queue(queue.name)


async def test_nothing_to_read_is_none_not_an_error(client: Any, unique: Unique) -> None:
    queue = await client.create_queue(unique("q"))
    assert await client.pop(queue.id) is None  # QUEUE_EMPTY
    assert await client.peek(sender=2**40) is None  # NO_MESSAGE
    assert await client.receive(queue.id, timeout=0) is None


async def test_client_not_found_exists_and_online(
    connect: Connect, servers: list[ServerProcess], client: Any
) -> None:
    with pytest.raises(errors.NotAuthorised, match=r"^login failed$"):  # as a wrong secret
        await connect(address(servers[0]), name="nobody-at-all")
    with pytest.raises(errors.ClientExists, match=f"named '{client.name}' already exists"):
        await client.register(client.name)
    with pytest.raises(errors.ClientOnline, match=f"'{client.name}' is already online"):
        await connect(address(servers[1]), name=client.name)


async def test_bad_requests(client: Any, unique: Unique) -> None:
    with pytest.raises(errors.BadRequest):
        await client.create_queue("")
    with pytest.raises(errors.BadRequest, match="order"):
        await client.pop(order="sideways")
    with pytest.raises(errors.BadRequest, match="negative"):
        await client.receive(unique("q"), timeout=-1)
    queue = await client.create_queue(unique("q"))
    for priority in (0, 11, 300):
        with pytest.raises(errors.InvalidPriority, match="from 1 to 10"):
            await client.send(queue, "x", priority=priority)
    with pytest.raises(errors.PayloadTooLarge) as too_large:
        await client.send(queue, "x" * 70_000)
    assert isinstance(too_large.value, errors.BadRequest)
    assert "70000" in too_large.value.message
    assert (await client.get_queue(queue.id)).message_count == 0


async def test_not_authorised_and_not_logged_in(
    connect: Connect, servers: list[ServerProcess], unique: Unique, client: Any
) -> None:
    anonymous = await connect(address(servers[0]))
    with pytest.raises(errors.NotLoggedIn):
        await anonymous.list_queues()
    watcher = unique("watcher")
    await anonymous.register(watcher, "read_only")
    read_only = await connect(address(servers[0]), name=watcher)
    queue = await client.create_queue(unique("q"))
    with pytest.raises(errors.NotAuthorised, match="read-only"):
        await read_only.send(queue, "not allowed")
    assert await read_only.pop(queue) is None


async def test_server_full(connect: Connect, start_server: StartServer, unique: Unique) -> None:
    full = await start_server(max_clients=1)
    first, second = unique("first"), unique("second")
    for name in (first, second):
        await register(address(full), name)
    await connect(address(full), name=first)
    with pytest.raises(errors.ServerFull, match="maximum of 1 logged-in clients"):
        await connect(address(full), name=second, connect_timeout=0.5)


async def test_a_client_waits_for_a_place_on_a_full_server(
    start_server: StartServer, unique: Unique
) -> None:
    full = await start_server(max_clients=1)
    first, second = unique("first"), unique("second")
    for name in (first, second):
        await register(address(full), name)
    holder = await courier.AsyncClient.connect(address(full), name=first)
    waiting = asyncio.ensure_future(
        courier.AsyncClient.connect(address(full), name=second, connect_timeout=10.0)
    )
    await asyncio.sleep(0.5)
    assert not waiting.done()  # still trying: the only place is taken
    await holder.close()
    newcomer = await asyncio.wait_for(waiting, 5.0)
    try:
        assert newcomer.name == second
    finally:
        await newcomer.close()


async def test_unavailable_when_the_database_is_gone(
    connect: Connect, start_server: StartServer, databases: Any, template_database: str
) -> None:
    doomed = databases.create(template=template_database)
    server = await start_server(dsn=doomed)
    client = await connect(address(server))
    databases.drop(doomed)
    with pytest.raises(errors.Unavailable):
        await client.register("too-late")


async def test_connection_lost_when_no_server_answers(connect: Connect) -> None:
    nobody = closed_port_address()
    with pytest.raises(errors.ConnectionLost, match=f"{nobody}: Connection refused"):
        await connect(nobody, connect_timeout=1.0)


async def test_request_timeout(client: Any, unique: Unique) -> None:
    queue = await client.create_queue(unique("q"))
    with pytest.raises(errors.RequestTimeout, match="no reply"):
        await client.request(queue, "anyone there?", timeout=0.3)


# A misbehaving peer: the library must turn what it does into typed errors.

Answer = Callable[[protocol.RawFrame], bytes]
Impostor = Callable[[Answer | None], Awaitable[str]]


@pytest.fixture
async def impostor() -> AsyncIterator[Impostor]:
    """A TCP server that answers each frame with ``answer(frame)`` bytes (None: silence)."""
    running: list[asyncio.Server] = []

    async def start(answer: Answer | None) -> str:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            decoder = protocol.Decoder()
            with contextlib.suppress(ConnectionError):
                while data := await reader.read(65536):
                    for raw in decoder.feed(data):
                        if answer is not None:
                            writer.write(answer(raw))
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        running.append(server)
        return f"127.0.0.1:{server.sockets[0].getsockname()[1]}"

    yield start
    for server in running:
        server.close()


def short_pong(raw: protocol.RawFrame) -> bytes:
    """A reply frame whose body is a bare OK status: a PONG needs 8 more bytes."""
    body = bytes([errors.Status.OK])
    flags = protocol.FLAG_RESPONSE
    return HEADER.pack(protocol.VERSION, raw.opcode, flags, raw.request_id, len(body)) + body


async def test_a_malformed_reply_is_a_protocol_error(connect: Connect, impostor: Impostor) -> None:
    with pytest.raises(errors.ProtocolError, match="PING"):
        await connect(await impostor(short_pong))


async def test_bytes_that_are_not_frames_lose_the_connection(
    connect: Connect, impostor: Impostor
) -> None:
    server = await impostor(lambda raw: b"HTTP/1.1 400 Bad Request\r\n\r\n")
    with pytest.raises(errors.ConnectionLost, match="not Courier frames"):
        await connect(server)


async def test_no_reply_in_time_is_a_request_timeout(connect: Connect, impostor: Impostor) -> None:
    with pytest.raises(errors.RequestTimeout, match=r"within 0\.3s"):
        await connect(await impostor(None), request_timeout=0.3)


async def test_each_call_times_out_at_its_own_deadline(impostor: Impostor) -> None:
    """Calls with different timeouts share one connection: a short one sent after a
    long one still fails on time, and the long one when its own time is up."""
    host, port = (await impostor(None)).rsplit(":", 1)
    link = await connection.Connection.open((host, int(port)), timeout=5)
    loop = asyncio.get_running_loop()

    async def timed_out_after(request_id: int, timeout: float) -> float:
        began = loop.time()
        with pytest.raises(errors.RequestTimeout, match=f"within {timeout:g}s"):
            await link.exchange(request_id, protocol.encode(request_id, protocol.Ping()), timeout)
        return loop.time() - began

    try:
        long = asyncio.create_task(timed_out_after(1, 1.5))
        await asyncio.sleep(0.05)
        short = await timed_out_after(2, 0.2)
        assert 0.2 <= short < 1.2  # well before the long call's 1.5 s
        assert not long.done()
        assert 1.5 <= await long < 4
    finally:
        await link.close()


async def test_a_late_error_reply_does_not_change_how_later_calls_fail(
    start_server: StartServer, unique: Unique
) -> None:
    """A RECEIVE given up locally is answered QUEUE_EMPTY later; when the connection
    then drops, the call in flight must fail as ConnectionLost (its fate unknown),
    not as that stale QUEUE_EMPTY, which ``pop`` would turn into "nothing there"."""
    server = await start_server(open_login=True)  # raw frames: an open LOGIN
    name = unique("late")
    await register(address(server), name)
    link = await connection.Connection.open(server.address, timeout=5)
    try:

        async def call(request_id: int, request: protocol.Request, timeout: float) -> Any:
            arrival = await link.exchange(request_id, protocol.encode(request_id, request), timeout)
            return arrival.reply

        await call(1, protocol.Login(client_id=None, name=name), 5)
        queue = (await call(2, protocol.CreateQueue(unique("q")), 5)).queue.id
        with pytest.raises(errors.RequestTimeout):
            await call(3, protocol.Receive(queue, None, models.Order.TIME, 300), 0.05)
        await asyncio.sleep(0.6)  # the late QUEUE_EMPTY has arrived by now
        waiting = asyncio.create_task(
            call(4, protocol.Receive(queue, None, models.Order.TIME, 30_000), 60)
        )
        await asyncio.sleep(0.2)
        server.signal(signal.SIGKILL)
        with pytest.raises(errors.ConnectionLost):
            await waiting
    finally:
        await link.close()


async def test_a_body_far_too_large_fails_typed_and_leaves_no_unseen_error(
    servers: list[ServerProcess], unique: Unique
) -> None:
    """The server refuses the frame and hangs up while the client is still writing
    it: the call fails with the server's reason, and asyncio has nothing to report."""
    unseen: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _, context: unseen.append(context))
    try:
        name = unique("big")
        await register(address(servers[0]), name)
        client = await courier.AsyncClient.connect(address(servers[0]), name=name)
        queue = await client.create_queue(unique("q"))
        with pytest.raises((errors.BadRequest, errors.ConnectionLost)):
            await client.send(queue, b"x" * (10 * 1024 * 1024))
        await client.close()
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(None)
    assert unseen == []
