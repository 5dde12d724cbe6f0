"""One client connection: read frames, run requests concurrently, write their replies.

Requests on a connection are pipelined: each runs as its own task and its reply
echoes its request id, in whatever order replies complete. A request that may
change the session (``handlers.CHANGES_SESSION``) is the exception: reading pauses
until it is answered, so every request sees the session as it was when it arrived.
The session a request leaves is its handler's result (``handlers.SessionChange``).
Replies are whole frames, so they never interleave; those that complete in the
same turn of the event loop (the answers of one batched database call) leave in
one ``writelines``.

A frame that cannot be parsed gets BAD_REQUEST and the connection carries on; a
stream that can no longer be cut into frames (bad version, oversize frame) or a
reply frame sent by a client gets an error reply, then the connection closes.

Slow peers cost bounded memory and time. While more than WRITE_HIGH_WATER bytes of
replies wait for a peer, no further request is read from it, so a peer that
pipelines without reading holds at most that plus the replies of the requests
already running; if it takes none of them for a whole frame timeout, it is cut
off (as is a closing connection whose peer stops taking its last replies). A
frame that has begun to arrive must be whole within the frame timeout, else the
peer gets an error and is dropped. A connection that has not logged in is dropped
after the login timeout (and may be pushed out sooner by newcomers: see
``admission``). A logged-in client must send something (a PING will do) at least
every idle timeout, or it is taken for dead and dropped, which releases its session
and its leases: that is how a peer whose host died or whose network went silent is
noticed. The Courier client sends PINGs by itself while it has nothing else to send.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import fcntl
import logging
import struct
import termios
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

from courier import config, errors, protocol, watchdog, write_flow
from courier.protocol import constants, exceptions, frames, names
from courier.protocol.constants import Opcode
from courier.server import admission, backend, handlers, measurement_hook, metrics, session

log = logging.getLogger(__name__)

MAX_IN_FLIGHT = 512
"""Requests one connection may have running at once; beyond it, reading pauses."""
DISPATCH_BURST = 32
"""Requests one connection starts before the others get a turn of the event loop: a
client pipelining thousands of requests must not make everyone wait behind them."""
WRITE_HIGH_WATER = 256 * 1024
"""Reply bytes waiting for a peer beyond which reading pauses until it takes them."""
WRITE_LOW_WATER = 64 * 1024
"""Reading resumes once the waiting replies are down to this."""

A_PLACE = "a place among the MAX_IN_FLIGHT"
"""What frames wait for while a connection has MAX_IN_FLIGHT requests running."""

WAITING_OPCODES = frozenset({Opcode.RECEIVE, Opcode.RECEIVE_MANY, Opcode.AWAIT_RESPONSE})


@dataclass(frozen=True, slots=True)
class ConnectionSettings:
    max_frame_bytes: int
    recorder: measurement_hook.Recorder | None = None
    frame_timeout: float = config.DEFAULT_FRAME_TIMEOUT
    """Seconds a peer may take to send a frame once it has begun, and may leave
    the replies waiting for it untaken before it is cut off."""
    login_timeout: float = config.DEFAULT_LOGIN_TIMEOUT
    """Seconds a connection may stay open without logging in."""
    idle_timeout: float = config.DEFAULT_IDLE_TIMEOUT
    """Seconds a logged-in client may send nothing before it is taken for dead."""
    metrics: metrics.Metrics | None = None


class Link(write_flow.WriteFlow):
    """A client connection's transport protocol: each chunk read goes straight to the
    connection (no stream reader, and no task woken per chunk); ``drain`` waits while
    the transport has paused writing, ``lost`` is done once the transport is.

    ``opened`` is called as the transport is made, before any chunk arrives; it makes
    the ``Connection`` (or refuses the peer)."""

    def __init__(self, opened: Callable[[Link, asyncio.Transport], None]) -> None:
        super().__init__()
        self._opened = opened
        self.connection: Connection | None = None
        self._over_tls = False
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._over_tls = transport.get_extra_info("sslcontext") is not None
        # A stream transport (uvloop's does not derive from asyncio.Transport).
        self._opened(self, cast(asyncio.Transport, transport))

    def data_received(self, data: bytes) -> None:
        if self.connection is not None:
            self.connection.received(data)

    def eof_received(self) -> bool:
        if self.connection is not None:
            self.connection.ended(None)
        # Keep a TCP transport open: the replies still running go out first. TLS ends
        # the transport whatever this says (and warns if it says otherwise).
        return not self._over_tls

    def connection_lost(self, exc: Exception | None) -> None:
        self.fail_drains()
        if self.connection is not None:
            self.connection.ended(exc)
        if not self.lost.done():
            self.lost.set_result(None)


class Connection:
    def __init__(
        self,
        link: Link,
        transport: asyncio.Transport,
        services: handlers.Services,
        settings: ConnectionSettings,
        places: admission.Admission[Connection],
    ) -> None:
        self._link = link
        self._transport = transport
        self._transport.set_write_buffer_limits(high=WRITE_HIGH_WATER, low=WRITE_LOW_WATER)
        self._loop = asyncio.get_running_loop()
        self._services = services
        self._frame_timeout = settings.frame_timeout
        self._frame_deadline: float | None = None  # loop time; set while a frame is partial
        self._login_timeout = settings.login_timeout
        self._idle_timeout = settings.idle_timeout
        self._last_heard = self._loop.time()
        self._login_deadline: float | None = None  # loop time; set while not logged in
        self._start_login_clock()
        self._seat = admission.Seat(places, self)
        self._recorder = settings.recorder
        self._metrics = settings.metrics
        self._decoder = protocol.Decoder(settings.max_frame_bytes)
        self.session = session.Session()
        self._tasks: dict[asyncio.Task[None], Opcode | int] = {}
        self._waiting: dict[int, asyncio.Task[None]] = {}  # RECEIVE/AWAIT_RESPONSE by request id
        self._cancelled: set[asyncio.Task[None]] = set()  # ended by CANCEL: answer them empty
        self._context: handlers.Context | None = None  # shared by unrecorded requests
        # Frames read and not yet started, with when their chunk arrived (see _pump).
        self._pending: collections.deque[tuple[frames.RawFrame, int, int]] = collections.deque()
        self._holding: object = None  # what the frames pending wait for, if anything
        self._catching_up: asyncio.Task[None] | None = None  # while the peer is behind
        self._paused = False  # reading is paused (the transport's, not the peer's)
        self._at_end = False  # the peer sent its last frames: end once they have started
        self._read_end: asyncio.Future[None] = self._loop.create_future()
        self._watchdog = watchdog.Watchdog(self._loop, self._on_watchdog)
        self._stopping = False
        self._outbox: list[bytes] = []  # replies to write at the end of this loop turn
        self._written = 0  # bytes handed to the transport, to tell whether the peer reads
        peer = transport.get_extra_info("peername")
        self._peer_host = str(peer[0]) if isinstance(peer, tuple) else str(peer)
        link.connection = self
        self._watch()

    @property
    def peer(self) -> str:
        peer = self._transport.get_extra_info("peername")
        return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)

    async def serve(self) -> None:
        """Serve until the peer leaves, the stream breaks, or ``stop`` is called."""
        try:
            await asyncio.shield(self._read_end)  # _abandon still ends reading if cancelled
            await self._finish()
        finally:
            self._abandon()
            self._watchdog.cancel()

    def push_out(self) -> None:
        """Newer connections need the place of this one, which has not logged in."""
        message = "too many connections that have not logged in: log in at once after connecting"
        self._write(protocol.encode(0, frames.ErrorReply(errors.Status.SERVER_FULL, message)))
        self.stop(graceful=False)

    def stop(self, *, graceful: bool = True) -> None:
        """Read no more requests. Graceful: answer those already running; otherwise
        end the waiting ones as if the peer had left."""
        self._stopping = graceful
        self._end_reading()

    # -- reading -----------------------------------------------------------------
    def received(self, data: bytes) -> None:
        """A chunk from the peer: its whole frames start at once, unless earlier ones
        still wait for their turn (see ``_pump``)."""
        if self._read_end.done():
            return
        self._last_heard = self._loop.time()
        arrived_ns = time.perf_counter_ns()
        wall_ns = time.time_ns() if self._recorder is not None else 0
        try:
            raws = self._decoder.feed(data)
        except exceptions.FramingError as exc:
            self._write(protocol.encode(0, frames.ErrorReply(exc.status, exc.message)))
            self._end_reading()
            return
        for raw in raws:
            self._pending.append((raw, arrived_ns, wall_ns))
        if self._holding is None:
            self._pump()
        # The clock starts after the chunk's requests were dispatched, so time spent
        # not reading (a peer that does not take its replies) never counts against it.
        # Other deadlines only move later as chunks arrive: the watchdog set for them
        # goes off early and waits on, so it needs setting only for a new frame clock.
        if self._watch_partial_frame(completed=bool(raws)) or not self._watchdog.armed:
            self._watch()

    def ended(self, exc: BaseException | None) -> None:
        """The peer sent its last byte (None), or the connection is gone (its error, or
        None). The frames read before the end still start, in order (TLS hands over
        the last chunk and the end together, even with reading paused); a connection
        that broke drops them, as its replies could not be sent."""
        if exc is None and self._pending:
            self._at_end = True
            return
        self._end_reading()

    def _end_reading(self) -> None:
        if self._read_end.done():
            return
        self._pending.clear()
        self._pause_reading()
        if self._catching_up is not None:
            self._catching_up.cancel()
        self._holding = None
        self._read_end.set_result(None)

    def _pump(self) -> None:
        """Start the frames read, in order, until one must wait: for a request that may
        change the session to be answered (later ones must see the session it leaves),
        for the peer to take its replies, for a free place among the MAX_IN_FLIGHT, or
        for the other connections' turn after DISPATCH_BURST. Reading pauses meanwhile,
        so a connection holds at most one chunk's frames unstarted."""
        started = 0
        while self._pending:
            raw, arrived_ns, wall_ns = self._pending[0]
            if raw.is_response:
                self._reject_reply_frame(raw)
                self._end_reading()
                return
            hold = self._hold_for()
            if hold is not None:
                self._hold(hold)
                return
            self._pending.popleft()
            task = self._dispatch(raw, arrived_ns, wall_ns)
            if raw.opcode in handlers.CHANGES_SESSION and not task.done():
                task.add_done_callback(self._release)
                self._hold(task)
                return
            started += 1
            if started == DISPATCH_BURST and self._pending:
                self._hold(self._loop.call_soon(self._release))
                return
        self._holding = None
        if self._at_end:
            self._end_reading()
            return
        if self._paused and not self._read_end.done():
            self._paused = False
            self._transport.resume_reading()
            self._watch_partial_frame(completed=True)  # the wait never counts against it
            self._watch()

    def _hold_for(self) -> object:
        """What the next frame must wait for (see ``_pump``), or None."""
        if self._transport.get_write_buffer_size() > WRITE_HIGH_WATER:
            self._catching_up = self._loop.create_task(self._caught_up())
            return self._catching_up
        if len(self._tasks) >= MAX_IN_FLIGHT:
            return A_PLACE  # _forget releases the hold when a request ends
        return None

    def _hold(self, reason: object) -> None:
        self._holding = reason
        self._pause_reading()

    def _release(self, _: object = None) -> None:
        """What the pending frames waited for is over: go on with them."""
        if self._holding is not None and not self._read_end.done():
            self._holding = None
            self._pump()

    def _pause_reading(self) -> None:
        if not self._paused and not self._transport.is_closing():
            self._paused = True
            self._transport.pause_reading()

    def _deadline(self) -> float | None:
        """The earliest deadline now in force (loop time), if any."""
        earliest = self._frame_deadline
        for deadline in (self._login_deadline, self._idle_deadline):
            if deadline is not None and (earliest is None or deadline < earliest):
                earliest = deadline
        return earliest

    def _watch(self) -> None:
        """Make sure the watchdog goes off by the current deadline. One timer serves
        many chunks (a timer per read cost a twelfth of the middleware's CPU per
        request): the idle deadline moves later with every chunk, so the watchdog
        usually goes off early, finds the deadline moved, and waits on."""
        deadline = self._deadline()
        if deadline is not None:
            self._watchdog.expect_by(deadline)

    def _on_watchdog(self) -> None:
        """End reading if a deadline has passed while the connection waits for the
        peer; otherwise wait on. While frames wait their turn, reading is paused and
        nothing is due: going on with them sets the watchdog again."""
        if self._holding is not None or self._read_end.done():
            return
        deadline = self._deadline()
        if deadline is None:
            return
        if self._loop.time() < deadline:
            self._watchdog.expect_by(deadline)
            return
        self._reject_overdue()
        self._end_reading()

    @property
    def _idle_deadline(self) -> float | None:
        if self.session.client is None:
            return None
        return self._last_heard + self._idle_timeout

    def _start_login_clock(self) -> None:
        self._login_deadline = self._loop.time() + self._login_timeout

    def _watch_partial_frame(self, *, completed: bool) -> bool:
        """Start the clock when a frame begins to arrive; stop it when none is partial.
        Whether the clock started."""
        if not self._decoder.buffered:
            self._frame_deadline = None
        elif completed or self._frame_deadline is None:
            self._frame_deadline = self._loop.time() + self._frame_timeout
            return True
        return False

    def _reject_overdue(self) -> None:
        now = self._loop.time()
        idle_deadline = self._idle_deadline
        if self._login_deadline is not None and now >= self._login_deadline:
            log.debug("%s did not log in within %gs; dropping it", self.peer, self._login_timeout)
            message = f"no LOGIN within {self._login_timeout:g}s of connecting"
        elif idle_deadline is not None and now >= idle_deadline:
            log.info("%s sent nothing for %gs; taking it for dead", self.peer, self._idle_timeout)
            message = f"nothing from the client for {self._idle_timeout:g}s"
        else:
            log.debug("%s left a frame incomplete for %gs; dropping it", self.peer,
                      self._frame_timeout)  # fmt: skip
            message = f"no whole frame within {self._frame_timeout:g}s of its first byte"
        self._write(protocol.encode(0, frames.ErrorReply(errors.Status.BAD_REQUEST, message)))

    async def _caught_up(self) -> None:
        """The peer is behind with its replies: read nothing more until it catches up.
        If it stopped reading altogether, it is cut off."""
        caught_up = await self._while_peer_reads(self._drain())
        self._catching_up = None
        if caught_up:
            self._release()
            return
        self._cut_off("takes none of its replies")
        self._end_reading()

    def _reject_reply_frame(self, raw: frames.RawFrame) -> None:
        reply = frames.ErrorReply(errors.Status.BAD_REQUEST, "clients send requests, not replies")
        self._write(protocol.encode(raw.request_id, reply, opcode=raw.opcode))

    def _dispatch(self, raw: frames.RawFrame, arrived_ns: int, wall_ns: int) -> asyncio.Task[None]:
        """Start answering the request in a task of its own."""
        request = Incoming(raw, self.session, arrived_ns, wall_ns)
        task = self._loop.create_task(self._answer(request))
        self._tasks[task] = raw.opcode
        task.add_done_callback(self._forget)
        if raw.opcode in WAITING_OPCODES:
            self._waiting[raw.request_id] = task
            task.add_done_callback(lambda done: self._stop_waiting(raw.request_id, done))
        return task

    def _forget(self, task: asyncio.Task[None]) -> None:
        del self._tasks[task]
        self._cancelled.discard(task)
        if self._holding is A_PLACE:
            self._release()

    def _stop_waiting(self, request_id: int, task: asyncio.Task[None]) -> None:
        # A later request may reuse the id: drop the entry only if it is still this one.
        if self._waiting.get(request_id) is task:
            del self._waiting[request_id]

    def _cancel_waiting(self, request_id: int) -> bool:
        """CANCEL: end this connection's waiting request ``request_id``, which is then
        answered as if its wait had timed out. False when there is none (answered)."""
        task = self._waiting.pop(request_id, None)
        if task is None or task.done():
            return False
        self._cancelled.add(task)
        task.cancel()
        return True

    # -- answering ---------------------------------------------------------------
    async def _answer(self, request: Incoming) -> None:
        raw = request.raw
        started_ns = time.perf_counter_ns()
        timing = backend.Timing() if self._recorder is not None else None
        parsed_ns = started_ns
        left = request.session  # the session the request leaves
        parsed: object = None
        try:
            parsed = protocol.parse(raw)
            parsed_ns = time.perf_counter_ns()
            self._check_waits(raw.opcode)
            reply, left = await self._handle(raw.opcode, parsed, request.session, timing)
        except errors.CourierError as exc:
            reply = frames.ErrorReply(exc.status, exc.message)
        except asyncio.CancelledError:
            if not self._uncancel_if_cancelled_by_client():
                raise
            status = errors.Status.QUEUE_EMPTY
            if raw.opcode == Opcode.AWAIT_RESPONSE:
                status = errors.Status.NO_MESSAGE
            reply = frames.ErrorReply(status, "the wait was cancelled")
        except Exception as exc:
            reply = self._unexpected(raw, exc)
        encode_ns = time.perf_counter_ns()
        data, sent = self._encode_reply(raw, reply)
        written_ns = self._write(data)
        if self._metrics is not None and raw.request_id != constants.PROBE_REQUEST_ID:
            code = sent.status if type(sent) is frames.ErrorReply else 0
            self._metrics.answered(raw.opcode, code, (written_ns - request.arrived_ns) / 1e9)
        if self._recorder is not None and raw.request_id != constants.PROBE_REQUEST_ID:
            operation = names.operation_name(parsed, names.OPERATIONS[raw.opcode])
            instants = (started_ns, parsed_ns, encode_ns, written_ns)
            self._record(request, left, operation, sent, timing, instants)

    def _check_waits(self, opcode: int) -> None:
        """A waiting request beyond the connection's limit is refused (it is counted
        among ``_waiting`` already)."""
        most = self._services.limits.max_waits_per_connection
        if opcode in WAITING_OPCODES and len(self._waiting) > most:
            raise errors.BadRequest(f"a connection may have at most {most} requests waiting")

    def _uncancel_if_cancelled_by_client(self) -> bool:
        task = asyncio.current_task()
        if task not in self._cancelled:
            return False
        assert task is not None
        task.uncancel()
        return True

    async def _handle(
        self,
        opcode: int,
        request: frames.Request | frames.Reply,
        current: session.Session,
        timing: backend.Timing | None,
    ) -> tuple[frames.Reply, session.Session]:
        """The reply, and the session the request leaves."""
        if current.client is None and opcode not in constants.PRE_LOGIN_OPCODES:
            raise errors.NotLoggedIn()
        handler = handlers.HANDLERS[opcode]
        result = await handler(self._context_for(current, timing), request)
        if not isinstance(result, handlers.SessionChange):
            return result, current
        self._enter(result.session)
        return result.reply, result.session

    def _context_for(
        self, current: session.Session, timing: backend.Timing | None
    ) -> handlers.Context:
        """A request's context. Contexts are immutable, so the requests of one session
        that are not timed share one rather than each building its own."""
        shared = self._context
        if timing is None and shared is not None and shared.session is current:
            return shared
        context = handlers.Context(self._services, current, timing, self._cancel_waiting,
                                   self._seat, self._peer_host)  # fmt: skip
        if timing is None:
            self._context = context
        return context

    def _enter(self, new: session.Session) -> None:
        """From now on the connection is in this session; only a logged-in one may idle
        past the login timeout."""
        self.session = new
        if new.client is None:
            self._start_login_clock()
        else:
            self._login_deadline = None
        self._watch()  # the idle deadline may come before the login deadline did

    def _unexpected(self, raw: frames.RawFrame, exc: Exception) -> frames.ErrorReply:
        # Storage reports an unreachable database as Unavailable, a CourierError that
        # _answer turns into its reply; what reaches here is a bug.
        log.exception("request %d (%s) failed", raw.request_id, exceptions.opcode_name(raw.opcode))
        return frames.ErrorReply(errors.Status.INTERNAL, errors.InternalError().message)

    def _encode_reply(
        self, raw: frames.RawFrame, reply: frames.Reply
    ) -> tuple[bytes, frames.Reply]:
        """The reply's frame and the reply it carries: INTERNAL if reply cannot be encoded."""
        try:
            return protocol.encode(raw.request_id, reply, opcode=raw.opcode), reply
        except exceptions.EncodeError:
            log.exception("cannot encode the reply to request %d", raw.request_id)
            internal = frames.ErrorReply(errors.Status.INTERNAL, "reply could not be encoded")
            return protocol.encode(raw.request_id, internal, opcode=raw.opcode), internal

    def _record(
        self,
        request: Incoming,
        left: session.Session,
        operation: str,
        sent: frames.Reply,
        timing: backend.Timing | None,
        instants: tuple[int, int, int, int],
    ) -> None:
        """Hand the recorder what the request cost and the status actually sent. A
        request is recorded under the client it came from, else the one it logged in."""
        assert self._recorder is not None and timing is not None
        started_ns, parsed_ns, encode_ns, written_ns = instants
        raw, arrived_ns = request.raw, request.arrived_ns
        client = request.session.client or left.client
        status = names.STATUSES[sent.status] if isinstance(sent, frames.ErrorReply) else "OK"
        row: measurement_hook.RequestRow = (
            client.id if client is not None else 0,
            raw.request_id,
            operation,
            status,
            request.wall_ns,  # receive_ns
            started_ns - arrived_ns,  # queued_ns
            timing.pool_wait_ns,
            timing.round_trip_ns,
            timing.exec_ns,
            parsed_ns - started_ns,  # deserialize_ns
            written_ns - encode_ns,  # serialize_ns
            written_ns - arrived_ns,  # total_ns
        )
        try:
            self._recorder(row)
        except Exception:
            log.exception("the request recorder failed")

    # -- writing and closing -------------------------------------------------------
    def _write(self, data: bytes) -> int:
        """Queue one whole frame for this turn's write; returns when it was queued."""
        if not self._outbox:
            self._loop.call_soon(self._flush)
        self._outbox.append(data)
        return time.perf_counter_ns()

    def _flush(self) -> None:
        outbox, self._outbox = self._outbox, []
        if outbox and not self._transport.is_closing():
            self._transport.writelines(outbox)
            self._written += sum(map(len, outbox))

    async def _drain(self) -> None:
        with contextlib.suppress(ConnectionError):  # lost: nothing more to wait for
            await self._link.drain()

    async def _while_peer_reads(self, work: Coroutine[Any, Any, None]) -> bool:
        """Await ``work`` (until the transport drains or closes) as long as the peer
        keeps taking replies; False once it took none for a whole frame timeout."""
        task = asyncio.ensure_future(work)
        try:
            taken = self._taken()
            while not (await asyncio.wait({task}, timeout=self._frame_timeout))[0]:
                if self._taken() == taken:
                    return False
                taken = self._taken()
            return True
        finally:
            task.cancel()

    def _taken(self) -> int:
        """Reply bytes the peer's side of the socket has acknowledged so far."""
        waiting = self._transport.get_write_buffer_size() + kernel_backlog(self._transport)
        return self._written - waiting

    def _cut_off(self, reason: str) -> None:
        log.debug("%s %s for %gs; cutting it off", self.peer, reason, self._frame_timeout)
        self._transport.abort()

    async def _finish(self) -> None:
        if not self._stopping:
            # The peer is gone: nobody will read what a waiting request finds.
            for task, opcode in list(self._tasks.items()):
                if opcode in WAITING_OPCODES:
                    task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks))
        await self._log_out()
        self._flush()
        self._transport.close()
        await self._wait_closed()

    async def _wait_closed(self) -> None:
        """Let the peer take its last replies, unless it stopped taking them."""
        if not await self._while_peer_reads(self._closed()):
            self._cut_off("takes none of its last replies")

    async def _closed(self) -> None:
        await asyncio.shield(self._link.lost)

    def _abandon(self) -> None:
        """Serving was cut short (a shutdown past its grace): drop what still runs."""
        self._end_reading()
        for task in self._tasks:
            task.cancel()
        self._transport.abort()

    async def _log_out(self) -> None:
        """The connection ended without LOGOUT: the leases taken through it go back
        (a client that logs out keeps them until they run out or it settles them),
        and the session ends."""
        client = self.session.client
        if client is None:
            return
        self.session = session.Session()
        await self._services.logouts.end_session(client.id)


def kernel_backlog(transport: asyncio.BaseTransport) -> int:
    """Bytes the kernel still holds for the peer, unsent or unacknowledged (Linux's
    SIOCOUTQ); 0 where that cannot be told. A peer's window only opens as it reads, so
    this moves long before the transport's own buffer does."""
    sock = transport.get_extra_info("socket")
    try:
        answer = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0")
    except (OSError, AttributeError, ValueError):
        return 0
    count: int = struct.unpack("i", answer)[0]
    return count


class Incoming(NamedTuple):
    """A frame as it arrived: the session then current and when it came. (A named
    tuple: one is built per request, at a third of a frozen dataclass's cost.)"""

    raw: frames.RawFrame
    session: session.Session
    arrived_ns: int  # perf_counter_ns
    wall_ns: int  # time_ns, only when recording
