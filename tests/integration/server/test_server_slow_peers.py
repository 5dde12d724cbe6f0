"""Slow and stalled peers: bounded memory, no harm to others, dropped when they stall.

A *hoarder* pipelines thousands of reads of a 60 KB message and never reads the
replies (its receive window kept small, so the server feels it at once). A
*staller* sends part of a frame and stops.
"""

from __future__ import annotations

import asyncio
import socket
import statistics
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from server_harness import Connect, WireClient, log_in_new

from courier import models, protocol
from courier.errors import Status
from courier.protocol import frames
from helpers.servers import ServerProcess, StartServer

TIME = models.Order.TIME
BODY_BYTES = 60_000  # under the default body limit of 64 KiB
MIB = 1024 * 1024


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


class RawPeer:
    """A raw connection whose reading the test controls (a small receive window)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.decoder = protocol.Decoder(64 * MIB)
        self.ids = iter(range(1, 1 << 31))

    @classmethod
    async def open(cls, address: tuple[str, int]) -> RawPeer:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, address)
        reader, writer = await asyncio.open_connection(sock=sock, limit=16 * 1024)
        return cls(reader, writer)

    async def replies(self, count: int, timeout: float = 30.0) -> list[frames.Reply]:
        found: list[frames.Reply] = []
        async with asyncio.timeout(timeout):
            while len(found) < count:
                data = await self.reader.read(64 * 1024)
                assert data, f"closed after {len(found)} of {count} replies"
                found += [protocol.parse(raw) for raw in self.decoder.feed(data)]  # type: ignore[misc]
        return found

    async def call(self, request: frames.Request) -> frames.Reply:
        self.writer.write(protocol.encode(next(self.ids), request))
        (reply,) = await self.replies(1)
        assert not isinstance(reply, frames.ErrorReply), reply
        return reply

    async def hoard_setup(self, name: str) -> int:
        """Log in, store one big message; its queue's id."""
        registered = await self.call(frames.Register(name, models.ClientMode.READ_WRITE))
        assert isinstance(registered, frames.ClientReply)
        await self.call(frames.Login(client_id=registered.client.id, name=None))
        queue = await self.call(frames.CreateQueue(f"{name}-queue"))
        assert isinstance(queue, frames.QueueReply)
        await self.call(frames.Send((queue.queue.id,), b"x" * BODY_BYTES, None, 5, None))
        return queue.queue.id

    def pipeline_peeks(self, queue_id: int, count: int) -> None:
        peek = frames.Read(queue_id, None, TIME, pop=False)
        self.writer.write(b"".join(protocol.encode(next(self.ids), peek) for _ in range(count)))

    def close(self) -> None:
        self.writer.transport.abort()


@pytest.fixture
async def peers() -> AsyncIterator[list[RawPeer]]:
    opened: list[RawPeer] = []
    yield opened
    for peer in opened:
        peer.close()


async def cycle(client: WireClient, queue_id: int, body: str) -> float:
    """Send one message and pop it back; the seconds it took."""
    started = time.perf_counter()
    await client.ok(frames.Send((queue_id,), body.encode(), None, 5, None))
    reply = await client.ok(frames.Read(queue_id, None, TIME, pop=True))
    assert isinstance(reply, frames.MessageReply) and reply.message.text == body
    return time.perf_counter() - started


async def sample_rss(pid: int, samples: list[int], stop: asyncio.Event) -> None:
    while not stop.is_set():
        samples.append(rss_bytes(pid))
        await asyncio.sleep(0.02)


async def test_a_client_that_never_reads_costs_bounded_memory_and_slows_no_one(
    server: ServerProcess, connect: Connect, peers: list[RawPeer]
) -> None:
    good = await connect(server)
    await log_in_new(good, "steady")
    queue = (await good.ok(frames.CreateQueue("steady-queue"))).queue  # type: ignore[union-attr]
    hoarder = await RawPeer.open(server.address)
    peers.append(hoarder)
    hoard = await hoarder.hoard_setup("hoarder")
    before = [await cycle(good, queue.id, f"before {n}") for n in range(30)]
    rss_before = rss_bytes(server.pid)
    samples: list[int] = []
    stop = asyncio.Event()
    sampling = asyncio.create_task(sample_rss(server.pid, samples, stop))
    hoarded = 4000  # 240 MB of replies, were the server to keep them all
    hoarder.pipeline_peeks(hoard, hoarded)
    # While the server works through what it reads, and after it stops reading.
    first = [await cycle(good, queue.id, f"first {n}") for n in range(30)]
    await asyncio.sleep(1.0)
    after = [await cycle(good, queue.id, f"after {n}") for n in range(30)]
    stop.set()
    await sampling
    assert max(samples) - rss_before < 100 * MIB, [s // MIB for s in samples[::10]]
    assert max(first) < 2.0
    assert statistics.median(after) < 3 * statistics.median(before) + 0.02, (before, after)
    # Nothing was dropped: once the hoarder reads, every reply arrives.
    replies = await hoarder.replies(hoarded, timeout=60)
    assert all(
        isinstance(reply, frames.MessageReply) and len(reply.message.body) == BODY_BYTES
        for reply in replies
    )


async def admitted_after(server: ServerProcess, name: str, deadline: float) -> float:
    """Seconds until a newcomer may log in as ``name`` (the server is at capacity)."""
    started = time.monotonic()
    while time.monotonic() < deadline:
        newcomer = await WireClient.connect(server.address)
        try:
            login = frames.Login(client_id=None, name=name)
            if isinstance(await newcomer.call(login, timeout=1), frames.ClientReply):
                return time.monotonic() - started
        except Exception:
            pass
        finally:
            await newcomer.close()
        await asyncio.sleep(0.05)
    raise AssertionError("the connection of the peer that stopped reading was never freed")


@pytest.mark.parametrize("half_close", [False, True], ids=["open", "half-closed"])
async def test_a_client_that_stops_reading_is_cut_off_after_the_frame_timeout(
    start_server: StartServer, connect: Connect, peers: list[RawPeer], half_close: bool
) -> None:
    server = await start_server(frame_timeout=1, max_clients=2)
    good = await connect(server)
    await log_in_new(good, "patient")
    assert isinstance(await good.ok(frames.Register("newcomer", models.ClientMode.READ_WRITE)),
                      frames.ClientReply)  # fmt: skip
    hoarder = await RawPeer.open(server.address)
    peers.append(hoarder)
    hoard = await hoarder.hoard_setup("stopper")
    hoarder.pipeline_peeks(hoard, 1000)
    if half_close:
        hoarder.writer.write_eof()
    waited = await admitted_after(server, "newcomer", time.monotonic() + 15)
    assert waited >= 0.9  # the hoarder held its place for a whole timeout first
    assert isinstance(await good.ok(frames.Ping()), frames.Pong)


async def test_a_slow_but_steady_reader_is_never_cut_off(
    start_server: StartServer, peers: list[RawPeer]
) -> None:
    server = await start_server(frame_timeout=0.3)
    reader = await RawPeer.open(server.address)
    peers.append(reader)
    hoard = await reader.hoard_setup("sipper")
    peeks = 80  # 4.8 MB: more than the socket buffers hold, read at ~1.5 MB/s
    reader.pipeline_peeks(hoard, peeks)
    await asyncio.sleep(0.3)
    reader.writer.write(protocol.encode(0, frames.Ping()))  # read once the replies drain
    started = time.monotonic()
    found: list[frames.Reply] = []
    while len(found) < peeks + 1:
        await asyncio.sleep(0.02)
        data = await asyncio.wait_for(reader.reader.read(32 * 1024), 5)
        assert data, f"cut off after {len(found)} replies"
        found += [protocol.parse(raw) for raw in reader.decoder.feed(data)]  # type: ignore[misc]
    assert time.monotonic() - started > 1.5  # slower than the timeout, many times over
    assert sum(isinstance(reply, frames.MessageReply) for reply in found) == peeks
    assert sum(isinstance(reply, frames.Pong) for reply in found) == 1


async def dropped_after(client: WireClient) -> float:
    """Seconds until the server answers with a connection error and hangs up."""
    started = time.monotonic()
    raw, reply = await client.next_unsolicited(timeout=10)
    assert raw.request_id == 0 and raw.opcode == protocol.NO_OPCODE
    assert isinstance(reply, frames.ErrorReply) and reply.status == Status.BAD_REQUEST
    assert "no whole frame" in reply.message
    await client.wait_closed_by_server()
    return time.monotonic() - started


async def test_a_half_sent_frame_is_dropped_after_the_frame_timeout(
    start_server: StartServer, connect: Connect
) -> None:
    server = await start_server(frame_timeout=1)
    good, staller, trickler, idler, pauser = [await connect(server) for _ in range(5)]
    ping = protocol.encode(9, frames.Ping())
    staller.send_raw(ping[:7])

    async def trickle() -> None:  # a byte at a time: the deadline counts from the first
        frame = protocol.encode(10, frames.CreateQueue("x" * 30))
        for byte in frame:
            trickler.send_raw(bytes([byte]))
            await asyncio.sleep(0.1)

    async def pause_within_the_timeout() -> frames.Reply:
        pauser.send_raw(ping[:5])
        await asyncio.sleep(0.5)
        pauser.send_raw(ping[5:])
        _, reply = await pauser.next_unsolicited()
        return reply

    trickling = asyncio.create_task(trickle())
    paused = asyncio.create_task(pause_within_the_timeout())
    staller_drop, trickler_drop = await asyncio.gather(
        dropped_after(staller), dropped_after(trickler)
    )
    trickling.cancel()
    assert 0.9 <= staller_drop < 3 and 0.9 <= trickler_drop < 3
    assert isinstance(await paused, frames.Pong)
    # An idle connection (no frame begun) outlives the timeout, and so does everyone else.
    assert isinstance(await idler.ok(frames.Ping()), frames.Pong)
    assert isinstance(await good.ok(frames.Ping()), frames.Pong)
