"""The clients of `courier bench fuzz`: fuzzing connections, and the one that behaves.

A fuzzing connection (``fuzz_connection``) plays one role:

``anonymous``  never logs in: most requests get NOT_LOGGED_IN, after their body was
               parsed, and REGISTER and LOGIN run for real;
``logged-in``  registers and logs in as a client of its own first, so SEND, READ and
               the rest reach their handlers and the database;
``staller``    sends a few valid frames and the start of one more, then waits for the
               server to drop it (its frame timeout).

The first two pipeline frames of the keeping kinds in batches, while a reader
counts the replies by status; then either an ending frame (the server should hang
up) or a closing PING whose reply says the stream stayed in step to its end.

``Guard`` keeps the well-behaved clients out of reach: no fuzzing connection ever
sends a frame holding the bytes of a DELETE_QUEUE of their queues or of a LOGIN by
their ids. Checking each frame on its own is enough: up to its last frame a
connection's stream is in step (the server cuts it where the bench does), and an
ending frame is the last, its bytes checked wherever the server may cut them.
Anything else a mutation might aim at a good client (a SEND into its queue) cannot
take its messages, which are addressed to itself; ``fuzzgood.GoodClient`` counts
such strangers apart instead of calling them losses.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from courier import errors, models, protocol
from courier.bench import fuzzframes
from courier.errors import Status
from courier.protocol import frames

ANONYMOUS = "anonymous"
LOGGED_IN = "logged-in"
STALLER = "staller"

BATCH_FRAMES = 64
MOST_FRAMES = 1000
"""Frames one fuzzing connection sends at most (1 to this, uniformly)."""
ENDING_SHARE = 0.3
"""Connections that end with a frame after which the server must hang up."""
STALL_FRAMES = 8
CONNECT_TIMEOUT_S = 5.0
WRITE_TIMEOUT_S = 30.0
CLOSING_PING_WAIT_S = 10.0
REPLIES_WAIT_S = 2.0
STALL_GRACE_S = 5.0
"""How much longer than the frame timeout a stalled connection is watched."""
READ_LIMIT = 64 * 1024 * 1024
PARSE_EVERY = 16
"""Every this many replies is parsed in full, to catch a malformed one."""
CLOSING_PING_ID = 0xFFFF_FFFF
REGISTER_ID = fuzzframes.CONTROL_IDS + 1
LOGIN_ID = fuzzframes.CONTROL_IDS + 2
STATUS_NAMES = {int(status): status.name for status in errors.Status}


@dataclass(slots=True)
class Tally:
    """What all fuzzing connections did and saw (one event loop: no locks)."""

    budget: int
    frames: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    roles: Counter[str] = field(default_factory=Counter)
    endings: Counter[str] = field(default_factory=Counter)  # how connections ended
    stall_drops_s: list[float] = field(default_factory=list)
    malformed_replies: int = 0
    guarded: int = 0  # frames made again because they held a guarded pattern
    last_problem: str = ""

    @property
    def sent(self) -> int:
        return sum(self.frames.values())

    def take(self, wanted: int) -> int:
        """Reserve up to ``wanted`` frames of the run's budget; 0 once it is spent."""
        granted = max(0, min(wanted, self.budget))
        self.budget -= granted
        return granted


# How a fuzzing connection ended.
CLOSED_BY_BENCH = "closed by the bench"
DROPPED_AFTER_ENDING = "dropped after an ending frame"
DROPPED_AFTER_STALL = "dropped after a stall"
DROPPED_IN_STEP = "dropped while in step"
KEPT_AFTER_ENDING = "kept after an ending frame"
STALL_NOT_DROPPED = "stall not dropped"
CLOSING_PING_UNANSWERED = "closing PING unanswered"
REFUSED = "refused (server full)"
CONNECT_FAILED = "could not connect"
WRITE_STALLED = "server stopped reading"
LOGIN_FAILED = "could not log in"
PROBLEMS = (
    DROPPED_IN_STEP,
    STALL_NOT_DROPPED,
    CLOSING_PING_UNANSWERED,
    WRITE_STALLED,
    LOGIN_FAILED,
)
"""Endings that a server keeping to its protocol never causes."""


@dataclass(frozen=True, slots=True)
class Guard:
    """Byte patterns no fuzzing connection may send (see the module docstring)."""

    patterns: tuple[bytes, ...]

    @classmethod
    def protecting(cls, queue_ids: Sequence[int], client_ids: Sequence[int]) -> Guard:
        nine = (9).to_bytes(4, "big")  # the body length of both requests
        deletes = (nine + queue.to_bytes(8, "big") for queue in queue_ids)
        logins = (nine + b"\x01" + client.to_bytes(8, "big") for client in client_ids)
        return cls((*deletes, *logins))

    def hits(self, data: bytes) -> bool:
        return any(pattern in data for pattern in self.patterns)


class ReplyReader:
    """Reads one connection's replies until it closes, counting them by status."""

    def __init__(self, reader: asyncio.StreamReader, tally: Tally) -> None:
        self._reader = reader
        self._tally = tally
        self._seen = 0
        self.expected = 0  # replies to wait for before closing; 0: none
        self.all_in = asyncio.Event()
        self.closed = asyncio.Event()  # the server hung up (or the stream broke)
        self.closing_ping = asyncio.Event()
        self.refused = False
        self.farewell = ""  # the server's last error about the connection itself
        self.control_seen = False
        self.control: dict[int, asyncio.Future[frames.Reply]] = {}

    async def run(self) -> None:
        decoder = protocol.Decoder(READ_LIMIT)
        try:
            while data := await self._reader.read(65536):
                for raw in decoder.feed(data):
                    self._take(raw)
        except errors.ProtocolError as exc:
            self._tally.malformed_replies += 1
            self._tally.last_problem = f"reply stream broken: {exc}"
        except ConnectionError:
            pass
        finally:
            self.closed.set()
            for future in self.control.values():
                if not future.done():
                    future.set_exception(errors.ConnectionLost())

    @property
    def answered(self) -> bool:
        """Whether any reply came: a refused connection gets none but SERVER_FULL."""
        return self._seen > 0 or self.control_seen

    def _take(self, raw: frames.RawFrame) -> None:
        if raw.request_id >= fuzzframes.CONTROL_IDS and self._control(raw):
            return
        status = STATUS_NAMES.get(raw.body[0], "malformed") if raw.body else "malformed"
        self._tally.statuses[status] += 1
        if raw.request_id == 0 and status != "OK":
            self._farewell(raw, status)
        self._seen += 1
        if self._seen % PARSE_EVERY == 0 or status == "malformed":
            self._check(raw)
        if self._seen == self.expected:
            self.all_in.set()

    def _farewell(self, raw: frames.RawFrame, status: str) -> None:
        self.refused |= status == errors.Status.SERVER_FULL.name
        with contextlib.suppress(errors.ProtocolError):
            reply = protocol.parse(raw)
            if isinstance(reply, frames.ErrorReply):
                self.farewell = reply.message

    def _control(self, raw: frames.RawFrame) -> bool:
        self.control_seen = True
        if raw.request_id == CLOSING_PING_ID:
            self.closing_ping.set()
            return True
        future = self.control.pop(raw.request_id, None)
        if future is None:
            return False
        future.set_result(protocol.parse(raw))  # type: ignore[arg-type]
        return True

    def _check(self, raw: frames.RawFrame) -> None:
        try:
            protocol.parse(raw)
        except errors.ProtocolError as exc:
            self._tally.malformed_replies += 1
            self._tally.last_problem = f"malformed reply to request {raw.request_id}: {exc}"

    async def call(
        self, writer: asyncio.StreamWriter, request_id: int, request: frames.Request
    ) -> frames.Reply:
        future: asyncio.Future[frames.Reply] = asyncio.get_running_loop().create_future()
        self.control[request_id] = future
        writer.write(protocol.encode(request_id, request))
        try:
            return await asyncio.wait_for(future, CLOSING_PING_WAIT_S)
        except TimeoutError:
            raise errors.RequestTimeout(f"no reply to {type(request).__name__}") from None


@dataclass(slots=True)
class Plan:
    """What the fuzzing connections share: the frames they make and what they count."""

    maker: fuzzframes.FrameMaker
    guard: Guard
    tally: Tally
    name_prefix: str
    frame_timeout_s: float
    logins: int = 0


class FuzzStream:
    """One fuzzing connection's writing side: guarded, counted batches of frames."""

    def __init__(self, writer: asyncio.StreamWriter, plan: Plan) -> None:
        self.writer = writer
        self._plan = plan
        self.sent = 0  # frames, not counting the bench's own
        self.granted = 0  # frames of the run's budget this connection took

    async def send(self, made: Sequence[tuple[str, bytes]]) -> None:
        """Write one batch of (kind, frame) and count it."""
        data = b"".join(frame for _, frame in made)
        self._plan.tally.frames.update(kind for kind, _ in made)
        self.sent += len(made)
        self.writer.write(data)
        async with asyncio.timeout(WRITE_TIMEOUT_S):
            await self.writer.drain()

    def made(self, count: int, ending: bool = False) -> list[tuple[str, bytes]]:
        """A batch of keeping (or ending) frames, each made again while it holds a
        guarded pattern."""
        maker, guard = self._plan.maker, self._plan.guard
        batch: list[tuple[str, bytes]] = []
        while len(batch) < count:
            kind, frame = maker.ending() if ending else maker.keeping()
            if guard.hits(frame):
                self._plan.tally.guarded += 1
            else:
                batch.append((kind, frame))
        return batch


async def fuzz_connection(address: tuple[str, int], role: str, plan: Plan) -> None:
    """Open one connection, play ``role`` on it, record how it ended."""
    tally = plan.tally
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT_S):
            reader, writer = await asyncio.open_connection(*address)
    except (OSError, TimeoutError):
        tally.endings[CONNECT_FAILED] += 1
        await asyncio.sleep(0.1)
        return
    tally.roles[role] += 1
    replies = ReplyReader(reader, tally)
    reading = asyncio.create_task(replies.run())
    stream = FuzzStream(writer, plan)
    try:
        ending = await play(role, stream, replies, plan)
    except ConnectionError:
        ending = DROPPED_IN_STEP
    except TimeoutError:
        ending = WRITE_STALLED
    except errors.CourierError as exc:
        tally.last_problem = f"{role} connection: {exc}"
        ending = DROPPED_IN_STEP if replies.closed.is_set() else LOGIN_FAILED
    finally:
        writer.transport.abort()
        await asyncio.wait({reading}, timeout=1.0)
        reading.cancel()
    tally.budget += stream.granted - stream.sent  # what a connection cut short left unsent
    if replies.refused or (ending == DROPPED_IN_STEP and not replies.answered):
        ending = REFUSED  # a reset may destroy the SERVER_FULL reply before it is read
    tally.endings[ending] += 1
    if ending in PROBLEMS:
        tally.last_problem = f"{role} connection {ending}: {replies.farewell or 'no reason given'}"


async def play(role: str, stream: FuzzStream, replies: ReplyReader, plan: Plan) -> str:
    if role == STALLER:
        return await stall(stream, replies, plan)
    if role == LOGGED_IN:
        await log_in(stream, replies, plan)
    count = stream.granted = plan.tally.take(plan.maker.rng.randint(1, MOST_FRAMES))
    if not count:
        return CLOSED_BY_BENCH
    ends = plan.maker.rng.random() < ENDING_SHARE
    for start in range(0, count - ends, BATCH_FRAMES):
        if replies.closed.is_set():
            return DROPPED_IN_STEP
        await stream.send(stream.made(min(BATCH_FRAMES, count - ends - start)))
    if ends:
        with contextlib.suppress(ConnectionError):  # it may hang up while this is written
            await stream.send(stream.made(1, ending=True))
        # A mangled length may leave the server waiting for more body: a stall.
        wait_s = plan.frame_timeout_s + STALL_GRACE_S
        return await closed_within(replies, wait_s, DROPPED_AFTER_ENDING, KEPT_AFTER_ENDING)
    return await close_in_step(stream, replies, count)


async def close_in_step(stream: FuzzStream, replies: ReplyReader, sent: int) -> str:
    """A closing PING: its reply shows the stream stayed in step. Then the replies
    still running, briefly (a RECEIVE may wait far longer)."""
    replies.expected = sent
    stream.writer.write(protocol.encode(CLOSING_PING_ID, frames.Ping()))
    if not await first_of(replies.closing_ping, replies.closed, CLOSING_PING_WAIT_S):
        return CLOSING_PING_UNANSWERED
    if replies.closed.is_set():
        return DROPPED_IN_STEP
    await first_of(replies.all_in, replies.closed, REPLIES_WAIT_S)
    return CLOSED_BY_BENCH


async def first_of(one: asyncio.Event, other: asyncio.Event, timeout: float) -> bool:
    """Wait until either event is set (True) or the timeout passes (False)."""
    waits = {asyncio.create_task(one.wait()), asyncio.create_task(other.wait())}
    done, pending = await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    return bool(done)


async def closed_within(replies: ReplyReader, seconds: float, closed: str, open_: str) -> str:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(replies.closed.wait(), seconds)
    return closed if replies.closed.is_set() else open_


LOGIN_ATTEMPTS = 3
"""Fresh clients a connection tries: a fuzzed LOGIN by another connection may take a
new client's session between its REGISTER and its LOGIN (CLIENT_ONLINE)."""


async def log_in(stream: FuzzStream, replies: ReplyReader, plan: Plan) -> None:
    """Register a client of this connection's own and log in as it."""
    for _ in range(LOGIN_ATTEMPTS):
        plan.logins += 1
        name = f"{plan.name_prefix}-c{plan.logins}"
        registered = await replies.call(
            stream.writer, REGISTER_ID, frames.Register(name, models.ClientMode.READ_WRITE)
        )
        if not isinstance(registered, frames.ClientReply):
            raise errors.BadRequest(f"could not register {name}: {registered}")
        login = frames.Login(client_id=registered.client.id, name=None)
        logged_in = await replies.call(stream.writer, LOGIN_ID, login)
        if isinstance(logged_in, frames.ClientReply):
            return
        taken = (
            isinstance(logged_in, frames.ErrorReply) and logged_in.status == Status.CLIENT_ONLINE
        )
        if not taken:
            break
    raise errors.BadRequest(f"could not log in as {name}: {logged_in}")


async def stall(stream: FuzzStream, replies: ReplyReader, plan: Plan) -> str:
    """A few valid frames, the start of one more, then silence."""
    count = stream.granted = plan.tally.take(plan.maker.rng.randint(1, STALL_FRAMES))
    if not count:
        return CLOSED_BY_BENCH
    whole = [(fuzzframes.VALID, plan.maker.valid()) for _ in range(count - 1)]
    await stream.send([*whole, (fuzzframes.PARTIAL, plan.maker.partial())])
    started = time.monotonic()
    ending = await closed_within(
        replies, plan.frame_timeout_s + STALL_GRACE_S, DROPPED_AFTER_STALL, STALL_NOT_DROPPED
    )
    if ending == DROPPED_AFTER_STALL and not replies.refused:
        plan.tally.stall_drops_s.append(time.monotonic() - started)
    return ending


def role_of(slot: int) -> str:
    """Every eighth connection stalls; of the others, one in four logs in first."""
    if slot % 8 == 7:
        return STALLER
    return LOGGED_IN if slot % 4 == 1 else ANONYMOUS


async def fuzz_slot(slot: int, address: tuple[str, int], plan: Plan) -> None:
    """One connection after another in this slot, until the run's frames are spent."""
    role = role_of(slot)
    while plan.tally.budget > 0:
        await fuzz_connection(address, role, plan)
