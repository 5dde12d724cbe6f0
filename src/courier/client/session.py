"""The client's link to the middleware tier: the connection, failover and login.

Servers are tried in the order given. When the connection drops, the calls waiting
on it fail with ``errors.ConnectionLost`` (their fate is unknown) and the next call
reconnects, starting with a random one of the other servers (so the clients of a
dead middleware spread over the survivors), and logs in again as the same client.
A login on a survivor takes over the session of a middleware process that died, as
soon as the database has noticed the death (a few milliseconds); one cut off but
alive still holds it (CLIENT_ONLINE) until the survivors expire it. So failover
retries, soon at first and then less often, for up to ``failover_timeout`` seconds.

Request ids come from one counter per session, so (client id, request id) stays
unique across reconnects (the ids wrap after 2**32 - 1 calls).
"""

from __future__ import annotations

import asyncio
import hmac
import itertools
import random
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from courier import errors, models, protocol, scram
from courier.client import connection, measurement_hook
from courier.protocol import constants, frames, names

ReplyT = TypeVar("ReplyT", bound=protocol.Reply)

FIRST_RETRY_PAUSE = 0.01
"""Seconds before the second round over the server list while failing over: the
first round usually comes before the database has seen the old middleware die."""
RETRY_PAUSE = 0.2
"""The longest pause between rounds; each pause doubles the one before, up to this."""

LOGOUT_TIMEOUT = 2.0

HEARTBEAT_INTERVAL = 10.0
"""Seconds of sending nothing after which a connection sends a PING, well within the
server's idle timeout (60 s by default), after which it would take us for dead."""

WAITING_REQUESTS = (protocol.Receive, protocol.ReceiveMany, protocol.AwaitResponse)
"""Requests the server holds until a message comes; CANCEL ends them early."""

# The operation name a call's record carries, by request type: one dict lookup a call.
_OPERATIONS = {kind: names.OPERATIONS[opcode] for kind, opcode in frames.OPCODES.items()}


@dataclass(frozen=True, slots=True)
class Credentials:
    """Who to log in as: by id or by name (exactly one), with the secret (None: an
    open login, which only a server with open login accepts)."""

    client_id: int | None
    name: str | None
    secret: str | None = None


class Session:
    def __init__(
        self,
        servers: Sequence[connection.Address],
        *,
        connect_timeout: float,
        request_timeout: float | None,
        failover_timeout: float,
        recorder: measurement_hook.Recorder | None,
        heartbeat_interval: float | None = HEARTBEAT_INTERVAL,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        if not servers:
            raise ValueError("no server address given")
        self.servers = tuple(servers)
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self.failover_timeout = failover_timeout
        self.recorder = recorder
        self.heartbeat_interval = heartbeat_interval
        self.tls = tls
        self.client: models.ClientInfo | None = None
        self._credentials: Credentials | None = None
        self._connection: connection.Connection | None = None
        self._next_server = 0
        self._request_ids = itertools.count(1)
        self._connecting = asyncio.Lock()
        self._closed = False

    @property
    def server(self) -> str | None:
        """host:port of the middleware currently connected, if any."""
        current = self._connection
        return current.label if current is not None and not current.closed else None

    async def start(self, credentials: Credentials | None = None) -> None:
        """Connect to the first server that accepts.

        With credentials, log in as that client; else just PING, so a server that
        is full says so now and the next one is tried. While every server is full
        (places free up as clients leave, and a burst of newcomers pushes out
        connections that have not logged in yet) the round is tried again, for up
        to ``connect_timeout``; any other failure ends it.
        """
        async with self._connecting:
            self._credentials = credentials
            deadline = time.monotonic() + self.connect_timeout
            pause = FIRST_RETRY_PAUSE
            while True:
                try:
                    self._connection = await self._connect_to_any(failing_over=False)
                    return
                except errors.ServerFull:
                    if time.monotonic() + pause > deadline:
                        raise
                await asyncio.sleep(pause)
                pause = min(2 * pause, RETRY_PAUSE)

    async def login(self, credentials: Credentials) -> models.ClientInfo:
        link = await self._connected()
        client = await self._log_in(link, credentials)
        self._credentials = credentials
        return client

    def connection_now(self) -> connection.Connection | None:
        """The open connection, if any (a transaction commits only on the one it
        began on)."""
        current = self._connection
        return current if current is not None and not current.closed else None

    async def call_pinned(
        self, link: connection.Connection | None, request: protocol.Request, expected: type[ReplyT]
    ) -> ReplyT:
        """``call`` on ``link`` only: ConnectionLost, sending nothing, once it is gone."""
        return await self._call_on(self.check_pinned(link), request, expected)

    def check_pinned(self, link: connection.Connection | None) -> connection.Connection:
        """``link``, if it is still this session's open connection; else ConnectionLost."""
        if link is None or link.closed or link is not self._connection:
            raise errors.ConnectionLost(
                "the connection was lost while the transaction was open: nothing of it was applied"
            )
        return link

    async def call(
        self, request: protocol.Request, expected: type[ReplyT], *, wait: float = 0.0
    ) -> ReplyT:
        """Send ``request`` and return its reply; an error reply is raised.

        ``wait`` is how long the server may hold the request (RECEIVE and
        AWAIT_RESPONSE); the client's request timeout counts from then on.
        """
        current = self._connection
        if current is None or current.closed:
            current = await self._connected()
        return await self._call_on(current, request, expected, wait)

    async def close(self) -> None:
        """Log out (so the name is free at once) and close the connection."""
        self._closed = True
        current, self._connection = self._connection, None
        if current is None or current.closed:
            return
        if self.client is not None:
            try:
                async with asyncio.timeout(LOGOUT_TIMEOUT):
                    await self._call_on(current, protocol.Logout(), protocol.Done)
            except (errors.CourierError, TimeoutError):
                pass  # the server ends the session when the connection closes anyway
        await current.close()

    async def _connected(self) -> connection.Connection:
        current = self._connection
        if current is not None and not current.closed:
            return current
        async with self._connecting:
            if self._closed:
                raise errors.ConnectionLost("the client is closed")
            if self._connection is None or self._connection.closed:
                self._connection = await self._fail_over()
            return self._connection

    async def _fail_over(self) -> connection.Connection:
        deadline = time.monotonic() + self.failover_timeout
        self._next_server = self._random_survivor()
        pause = FIRST_RETRY_PAUSE
        while True:
            try:
                return await self._connect_to_any(failing_over=True)
            except (errors.ConnectionLost, errors.ServerFull) as exc:
                if time.monotonic() + pause > deadline:
                    raise errors.ConnectionLost(
                        f"{exc.message} (gave up after {self.failover_timeout:g} seconds)"
                    ) from exc
            await asyncio.sleep(pause)
            pause = min(2 * pause, RETRY_PAUSE)

    def _random_survivor(self) -> int:
        """A random server other than the one just lost (the one before ``_next_server``)."""
        count = len(self.servers)
        if count <= 2:
            return self._next_server
        return (self._next_server + random.randrange(count - 1)) % count

    async def _connect_to_any(self, *, failing_over: bool) -> connection.Connection:
        """One round over the servers, starting after the last one used.

        While failing over, CLIENT_ONLINE means the lost server's session is not yet
        released: that server counts as failed for this round.
        """
        failures: list[errors.CourierError] = []
        count = len(self.servers)
        first = self._next_server
        for step in range(count):
            try:
                return await self._connect_to((first + step) % count)
            except (errors.ConnectionLost, errors.ServerFull) as exc:
                failures.append(exc)
            except errors.ClientOnline as exc:
                if not failing_over:
                    raise
                failures.append(exc)
        reasons = "; ".join(failure.message for failure in failures)
        if all(isinstance(failure, errors.ServerFull) for failure in failures):
            raise errors.ServerFull(f"every server is full: {reasons}")
        if all(isinstance(failure, errors.TlsError) for failure in failures):
            raise errors.TlsError(reasons)  # a setup to fix, not a server to wait for
        raise errors.ConnectionLost(f"cannot reach any server: {reasons}")

    async def _connect_to(self, index: int) -> connection.Connection:
        opened = await connection.Connection.open(
            self.servers[index], self.connect_timeout, self.tls
        )
        self._next_server = (index + 1) % len(self.servers)
        try:
            await self._greet(opened)
        except errors.ServerFull as exc:
            await opened.close()
            raise errors.ServerFull(f"{opened.label} is full ({exc.message})") from exc
        except errors.ClientOnline as exc:
            await opened.close()
            raise errors.ClientOnline(_online_message(opened.label, self._who())) from exc
        except BaseException:
            await opened.close()
            raise
        if self.heartbeat_interval:
            opened.keep_alive(self.heartbeat_interval, self._ping_frame)
        return opened

    async def _greet(self, link: connection.Connection) -> None:
        """A new connection's first request: the login, or a PING without one. A
        client logged in before logs in again as the same client."""
        credentials = self._credentials
        if credentials is None:
            await self._call_on(link, protocol.Ping(), protocol.Pong)
            return
        if self.client is not None and credentials.secret is None:
            credentials = Credentials(self.client.id, None)
        await self._log_in(link, credentials)

    async def _log_in(
        self, link: connection.Connection, credentials: Credentials
    ) -> models.ClientInfo:
        if credentials.secret is None:
            login = protocol.Login(client_id=credentials.client_id, name=credentials.name)
            return (await self._call_on(link, login, protocol.ClientReply)).client
        return await self._prove(link, credentials, credentials.secret)

    async def _prove(
        self, link: connection.Connection, credentials: Credentials, secret: str
    ) -> models.ClientInfo:
        """SCRAM-SHA-256: prove the secret, then check that the server knew it too."""
        client_nonce = scram.new_nonce()
        start = protocol.LoginStart(credentials.client_id, credentials.name, client_nonce)
        challenge = await self._call_on(link, start, protocol.LoginChallenge)
        if not challenge.nonce.startswith(client_nonce) or (
            challenge.iterations < scram.MIN_ITERATIONS
        ):
            raise errors.NotAuthorised("the server's login challenge is not valid")
        salted = await asyncio.to_thread(
            scram.salted_password, secret, challenge.salt, challenge.iterations
        )
        user = scram.user_name(credentials.client_id, credentials.name)
        message = scram.auth_message(
            user, client_nonce, challenge.nonce, challenge.salt, challenge.iterations
        )
        proof = protocol.LoginProof(scram.client_proof(salted, message))
        reply = await self._call_on(link, proof, protocol.LoginReply)
        expected = scram.expected_server_signature(salted, message)
        if not hmac.compare_digest(reply.server_signature, expected):
            raise errors.NotAuthorised("the server could not show that it knows this secret")
        self.client = reply.client
        return reply.client

    def _who(self) -> str | int | None:
        credentials = self._credentials
        if credentials is None:
            return None
        return credentials.name if credentials.name is not None else credentials.client_id

    def _ping_frame(self) -> bytes:
        return protocol.encode(self._next_request_id(), protocol.Ping())

    async def _call_on(
        self,
        link: connection.Connection,
        request: protocol.Request,
        expected: type[ReplyT],
        wait: float = 0.0,
    ) -> ReplyT:
        request_id = self._next_request_id()
        # The clock for durations first, then the wall-clock start: a pause between
        # the two only makes the recorded call look longer, so it still spans the
        # moment the server received the request.
        started = time.perf_counter_ns()
        start_ns = time.time_ns()
        frame = protocol.encode(request_id, request)
        serialize_ns = time.perf_counter_ns() - started
        timeout = None if self.request_timeout is None else self.request_timeout + wait
        try:
            arrival = await link.exchange(request_id, frame, timeout)
        except (asyncio.CancelledError, errors.RequestTimeout):
            if isinstance(request, WAITING_REQUESTS):
                self._cancel_on(link, request_id)
            raise
        except errors.CourierError as exc:
            if self.recorder is not None:
                self.recorder((
                    link.label, self._client_id(), request_id, _operation(request),
                    measurement_hook.local_status(exc), start_ns, time.perf_counter_ns() - started,
                    serialize_ns, 0, len(frame), 0, (), (),
                ))  # fmt: skip
            raise
        reply = arrival.reply
        if type(reply) is protocol.ClientReply and type(request) is protocol.Login:
            self.client = reply.client  # before the record: a LOGIN counts as the new client's
        if self.recorder is not None:
            status = names.STATUSES[reply.status] if type(reply) is protocol.ErrorReply else "OK"
            ids, queues = measurement_hook.message_ids(request, reply)
            # A LOGIN_PROOF counts as the new client's too (the session is taken only
            # once the server's signature is checked).
            who = reply.client.id if type(reply) is protocol.LoginReply else self._client_id()
            self.recorder((
                link.label, who, request_id, _operation(request), status,
                start_ns, arrival.decoded_at_ns - started, serialize_ns,
                arrival.deserialize_ns, len(frame), arrival.size, ids, queues,
            ))  # fmt: skip
        return _expect(reply, expected)

    def _client_id(self) -> int:
        return self.client.id if self.client is not None else 0

    def _next_request_id(self) -> int:
        return (next(self._request_ids) - 1) % constants.MAX_REQUEST_ID + 1

    def _cancel_on(self, link: connection.Connection, request_id: int) -> None:
        """The caller gave up on a waiting request: the server is told to end it, so it
        pops nothing more for us; a leased message that was already on its way back
        is released at once rather than when its lease runs out."""

        def release(reply: protocol.Reply) -> None:
            if isinstance(reply, protocol.MessageReply) and reply.message.delivery is not None:
                nack = protocol.Nack(reply.message.delivery, 0, "the receiver gave up")
                link.post(protocol.encode(self._next_request_id(), nack))

        link.abandon(request_id, release)
        link.post(protocol.encode(self._next_request_id(), protocol.Cancel(request_id)))


def _operation(request: protocol.Request) -> str:
    return names.operation_name(request, _OPERATIONS[type(request)])


def _online_message(server: str, who: str | int | None) -> str:
    return f"{server}: client {who!r} is already online"


def _expect(reply: protocol.Reply, expected: type[ReplyT]) -> ReplyT:
    if isinstance(reply, expected):
        return reply
    if isinstance(reply, protocol.ErrorReply):
        raise reply.to_exception()
    raise errors.ProtocolError(f"expected {expected.__name__}, the server sent {reply!r}")
