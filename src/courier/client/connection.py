"""One TCP connection to a middleware: pipelined calls matched to replies by request id.

Any number of calls may be in flight at once. The bytes that arrive are cut into
frames as the transport hands them over (``_Replies``), each decoded and given to
the future waiting on its request id. (A stream and a reader task, woken for every
reply, cost the client 6% more CPU per request in the peer loop.) When the connection
drops, every call still waiting fails with ``errors.ConnectionLost``: the server may
or may not have carried it out.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass

from courier import errors, protocol, tls, watchdog, write_flow
from courier.protocol import frames

log = logging.getLogger(__name__)

Address = tuple[str, int]

MAX_REPLY_BYTES = 64 * 1024 * 1024
"""Replies carry whole queue lists, so the client accepts far larger frames than it sends."""

CLOSE_WAIT = 5.0
"""Seconds ``close`` lets the server take the bytes still buffered for it."""


def describe(exc: OSError) -> str:
    """``Connection refused`` rather than asyncio's ``Connect call failed (...)``."""
    return os.strerror(exc.errno) if exc.errno else str(exc)


def label(address: Address) -> str:
    host, port = address
    return f"{host}:{port}"


@dataclass(frozen=True, slots=True)
class Arrival:
    """A decoded reply and what it cost to receive."""

    reply: protocol.Reply
    decoded_at_ns: int
    """perf_counter_ns when decoding finished"""
    deserialize_ns: int
    size: int


class _Replies(write_flow.WriteFlow):
    """The transport's protocol: each chunk read goes straight to the connection, and
    ``drain`` waits while the transport has paused writing (more is buffered for the
    server than its high-water mark).

    A transport may read before its connection exists (uvloop does: a server that
    refuses a client says so at once), so what arrives before ``attach`` is kept and
    handed over then."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._early: list[bytes | BaseException | None] = []  # chunks, then the end
        self._on_data: Callable[[bytes], None] | None = None
        self._on_end: Callable[[BaseException | None], None] | None = None
        self.closed: asyncio.Future[None] = loop.create_future()

    def attach(
        self, on_data: Callable[[bytes], None], on_end: Callable[[BaseException | None], None]
    ) -> None:
        """From now on, chunks go to ``on_data``; the end of the stream (EOF, None) or
        of the connection (its error, or None) to ``on_end``."""
        self._on_data, self._on_end = on_data, on_end
        early, self._early = self._early, []
        for item in early:
            if isinstance(item, bytes):
                on_data(item)
            else:
                on_end(item)

    def data_received(self, data: bytes) -> None:
        if self._on_data is None:
            self._early.append(data)
        else:
            self._on_data(data)

    def eof_received(self) -> None:
        # The server will send nothing more: the calls waiting fail now, not once the
        # client's own bytes are flushed. The transport then closes.
        self._end(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self.fail_drains()
        self._end(exc)
        if not self.closed.done():
            self.closed.set_result(None)

    def _end(self, exc: BaseException | None) -> None:
        if self._on_end is None:
            self._early.append(exc)
        else:
            self._on_end(exc)


class Connection:
    """An open connection; build it with ``await Connection.open(address, timeout)``."""

    def __init__(self, address: Address, transport: asyncio.Transport, replies: _Replies) -> None:
        self.address = address
        self.label = label(address)
        self._transport = transport
        self._replies = replies
        self._loop = asyncio.get_running_loop()
        self._decoder = protocol.Decoder(MAX_REPLY_BYTES)
        self._pending: dict[int, asyncio.Future[Arrival]] = {}
        self._due: dict[int, float] = {}  # request id -> loop time its reply is due by
        self._watchdog = watchdog.Watchdog(self._loop, self._on_watchdog)
        self._orphans: dict[int, Callable[[protocol.Reply], None]] = {}  # see ``abandon``
        self._lost_reason: str | None = None
        self._refusal: errors.CourierError | None = None
        self._last_sent = self._loop.time()
        self._keeping_alive: asyncio.Task[None] | None = None
        self._first_chunk = True
        replies.attach(self._on_data, self._on_end)

    @classmethod
    async def open(
        cls, address: Address, timeout: float, context: ssl.SSLContext | None = None
    ) -> Connection:
        """Connect, over TLS when given an SSL context (it checks the host name)."""
        host, port = address
        try:
            async with asyncio.timeout(timeout):
                loop = asyncio.get_running_loop()
                transport, replies = await loop.create_connection(
                    lambda: _Replies(loop), host, port, ssl=context,
                    server_hostname=host if context else None,
                )  # fmt: skip
        except (ssl.SSLError, ssl.CertificateError) as exc:
            raise tls.handshake_failure(exc, label(address)) from exc
        except TimeoutError as exc:
            raise errors.ConnectionLost(f"cannot connect to {label(address)}: timed out") from exc
        except OSError as exc:
            reason = describe(exc)
            raise errors.ConnectionLost(f"cannot connect to {label(address)}: {reason}") from exc
        return cls(address, transport, replies)  # type: ignore[arg-type]

    @property
    def closed(self) -> bool:
        return self._lost_reason is not None

    async def exchange(self, request_id: int, frame: bytes, timeout: float | None) -> Arrival:
        """Send one request frame and wait for its reply.

        ConnectionLost if the connection drops first; RequestTimeout after ``timeout``
        seconds (the reply, should it come later, is dropped).
        """
        if self._lost_reason is not None:
            raise self._lost()
        future: asyncio.Future[Arrival] = self._loop.create_future()
        self._pending[request_id] = future
        due = None if timeout is None else self._loop.time() + timeout
        try:
            if not self._send(frame):
                raise self._lost()
            if self._writing_paused():  # the server is behind: wait, within the timeout
                async with asyncio.timeout_at(due):
                    await self._drain()
            if due is not None and not future.done():  # not failed by a loss meanwhile
                self._due[request_id] = due
                self._watchdog.expect_by(due)
            return await future
        except TimeoutError:
            raise errors.RequestTimeout(f"no reply from {self.label} within {timeout:g}s") from None
        finally:
            self._pending.pop(request_id, None)
            self._due.pop(request_id, None)
            if future.done() and not future.cancelled():
                future.exception()  # seen: the call raised its own error, or was answered

    def _writing_paused(self) -> bool:
        """Whether a drain may wait: more is buffered for the server than the
        transport's low-water mark (it resumes writing only at or below it)."""
        transport = self._transport
        low, _ = transport.get_write_buffer_limits()
        return transport.get_write_buffer_size() > low

    def _on_watchdog(self) -> None:
        """Fail every call whose reply is overdue (with TimeoutError, which ``exchange``
        turns into RequestTimeout); watch for the next one. One timer serves every
        call on the connection (a timeout per call cost a sixth of the client's CPU
        per request): it mostly goes off to find the calls it was set for answered."""
        now = self._loop.time()
        for request_id, due in list(self._due.items()):
            if due > now:
                continue
            del self._due[request_id]
            future = self._pending.get(request_id)
            if future is not None and not future.done():
                future.set_exception(TimeoutError())
        if self._due:
            self._watchdog.expect_by(min(self._due.values()))

    def post(self, frame: bytes) -> None:
        """Send a request whose reply nobody waits for (it is dropped when it comes)."""
        if self._lost_reason is None:
            self._send(frame)

    def keep_alive(self, interval: float, ping: Callable[[], bytes]) -> None:
        """While nothing else is sent, send ``ping()`` every ``interval`` seconds, so
        the server knows this client is alive (it drops clients silent for its idle
        timeout)."""
        self._keeping_alive = asyncio.create_task(self._ping_when_idle(interval, ping))

    async def _ping_when_idle(self, interval: float, ping: Callable[[], bytes]) -> None:
        loop = self._loop
        while self._lost_reason is None:
            await asyncio.sleep(max(0.0, self._last_sent + interval - loop.time()))
            if self._lost_reason is None and loop.time() - self._last_sent >= interval:
                self._send(ping())

    def _send(self, frame: bytes) -> bool:
        """Write a frame; False, and the connection lost, if its transport is closed.

        A transport can close (a reset seen by a write) before the reader meets the
        end of the stream; uvloop then raises RuntimeError on a write, asyncio drops it.
        """
        try:
            if not self._transport.is_closing():
                self._transport.write(frame)
                self._last_sent = self._loop.time()
                return True
        except RuntimeError:  # uvloop: "the handler is closed"
            pass
        self._lose("the connection was closed")
        return False

    def abandon(self, request_id: int, late_reply: Callable[[protocol.Reply], None]) -> None:
        """Nobody waits for ``request_id`` any more; should its reply still come, it goes
        to ``late_reply``."""
        if self._lost_reason is None:
            self._orphans[request_id] = late_reply

    async def close(self) -> None:
        """Close, letting the server take what was written; a server that takes none of
        it for CLOSE_WAIT seconds (or a close that is cancelled) drops it."""
        self._lose("the client closed the connection")
        self._transport.close()
        try:
            async with asyncio.timeout(CLOSE_WAIT):
                await asyncio.shield(self._replies.closed)
        except TimeoutError:
            self._transport.abort()
        except asyncio.CancelledError:
            self._transport.abort()
            raise

    async def _drain(self) -> None:
        try:
            await self._replies.drain()
        except OSError as exc:
            self._lose(describe(exc))
            raise self._lost() from exc

    def _on_data(self, data: bytes) -> None:
        if self._first_chunk and tls.looks_like_tls(data):
            self._refusal = errors.TlsError(
                f"{self.label} speaks TLS only: connect with TLS (tls=True, or --tls)"
            )
        self._first_chunk = False
        try:
            self._dispatch(self._decoder.feed(data))
        except errors.ProtocolError as exc:
            self._lose(f"the server sent bytes that are not Courier frames ({exc})")
            self._transport.close()

    def _on_end(self, exc: BaseException | None) -> None:
        reason = "the server closed the connection"
        if isinstance(exc, OSError):
            reason = describe(exc)
        self._lose(reason)

    def _dispatch(self, raws: list[protocol.RawFrame]) -> None:
        for raw in raws:
            started = time.perf_counter_ns()
            try:
                reply = protocol.parse(raw)
            except errors.ProtocolError as exc:
                self._fail_one(raw.request_id, exc)
                continue
            decoded = time.perf_counter_ns()
            if not frames.is_reply(reply):
                self._fail_one(raw.request_id, errors.ProtocolError("the server sent a request"))
                continue
            future = self._pending.get(raw.request_id)
            if future is not None and not future.done():
                future.set_result(Arrival(reply, decoded, decoded - started, raw.size))
            elif (late_reply := self._orphans.pop(raw.request_id, None)) is not None:
                try:
                    late_reply(reply)
                except Exception:  # the caller's callback: it must not break the link
                    log.exception("handling a late reply to request %d failed", raw.request_id)
            elif isinstance(reply, protocol.ErrorReply) and raw.request_id == 0:
                # About the connection itself (say, SERVER_FULL): the server hangs up next.
                # A late answer to a request nobody waits for any more is dropped: it
                # says nothing about the calls still in flight.
                self._refusal = reply.to_exception()

    def _fail_one(self, request_id: int, exc: errors.ProtocolError) -> None:
        future = self._pending.get(request_id)
        if future is not None and not future.done():
            future.set_exception(exc)

    def _lose(self, reason: str) -> None:
        if self._lost_reason is not None:
            return
        self._lost_reason = reason
        if self._keeping_alive is not None:
            self._keeping_alive.cancel()
        self._watchdog.cancel()
        self._replies.fail_drains()
        if self._pending:
            log.debug("%s lost (%s): failing %d calls", self.label, reason, len(self._pending))
        for future in self._pending.values():
            if not future.done():
                future.set_exception(self._lost())

    def _lost(self) -> errors.CourierError:
        """What a call on this dead connection raises: the server's refusal, if it sent one."""
        if self._refusal is not None:
            return type(self._refusal)(self._refusal.message)
        return errors.ConnectionLost(f"connection to {self.label} lost: {self._lost_reason}")
