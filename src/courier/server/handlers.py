"""One small handler per opcode, and the table that dispatches to them.

A handler takes the request's context and its typed request, calls the backend,
and returns a typed reply; a handler whose request changes the session (LOGIN,
LOGOUT) returns a ``SessionChange``: its reply and the session it leaves. Failures
are raised as courier.errors exceptions; the connection turns them into ErrorReply
frames. Identity always comes from the session, never from the request body.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from courier import config, errors, models, protocol, scram, selectors
from courier.protocol import frames
from courier.protocol.constants import Opcode
from courier.server import (
    backend,
    commit,
    logins,
    logouts,
    replicated_handlers,
    session,
    sweeper,
    topic_handlers,
    waiters,
)

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(slots=True)
class Services:
    """What every handler may use; one per server instance.

    ``instance_id`` changes only if the instance has to register again.
    """

    backend: backend.Cluster
    waiters: waiters.Waiters
    instance_id: int
    limits: config.Limits
    logouts: logouts.PendingLogouts
    sweeper: sweeper.Sweeper | None = None
    logins: logins.Logins = field(default_factory=logins.Logins)

    def due_in(self, milliseconds: int | None) -> None:
        """Something held falls due then: let the sweeper know."""
        if milliseconds and self.sweeper is not None:
            self.sweeper.due_in(milliseconds / 1000)


class Seat(Protocol):
    """The connection's hold on the server's places for logged-in clients."""

    def start_login(self) -> None:
        """A login with a secret began: newcomers no longer push the connection out."""

    def log_in(self) -> None:
        """Take a logged-in place; ServerFull when every one is taken."""

    def log_out(self) -> None:
        """Give the place back."""


@dataclass(frozen=True, slots=True)
class Context:
    """One request's view: the services, the session it arrived in, a timing sink."""

    services: Services
    session: session.Session
    timing: backend.Timing | None
    cancel_waiting: Callable[[int], bool]
    """Ends a waiting request of this connection by its request id (CANCEL)."""
    seat: Seat
    peer: str = ""
    """The peer's address (host only): failed logins are counted by it."""


@dataclass(frozen=True, slots=True)
class SessionChange:
    """What a request that changes the session returns: its reply, and the session
    the connection is in from then on."""

    reply: frames.Reply
    session: session.Session


async def ping(ctx: Context, request: frames.Ping) -> frames.Pong:
    return frames.Pong(server_time_ns=time.time_ns())


async def register(ctx: Context, request: frames.Register) -> frames.ClientReply:
    creator = ctx.session.client
    if request.mode is models.ClientMode.ADMIN and (
        creator is None or creator.mode is not models.ClientMode.ADMIN
    ):
        raise errors.NotAuthorised("only an admin may create an admin client")
    if request.verifier is None and not ctx.services.logins.open_login:
        raise errors.BadRequest("register with a secret (its verifier): this server requires one")
    client = await ctx.services.backend.register_client(
        request.name, request.mode, verifier=request.verifier, timing=ctx.timing
    )
    return frames.ClientReply(client)


async def login(ctx: Context, request: frames.Login) -> SessionChange:
    """Open login, by name or id alone: only on a server started with open login."""
    if ctx.session.client is not None:
        raise errors.BadRequest(f"already logged in as {ctx.session.client.name!r}; log out first")
    key = request.client_id if request.client_id is not None else request.name
    if key is None:
        raise errors.BadRequest("log in by client id or by name")
    if not ctx.services.logins.open_login:
        raise logins.failed()
    client = await take_seat(ctx, key)
    return SessionChange(frames.ClientReply(client), session.Session(client))


async def take_seat(ctx: Context, key: int | str, *, verified: bool = False) -> models.ClientInfo:
    """Open the session in the database, holding a logged-in place meanwhile."""
    services = ctx.services
    ctx.seat.log_in()  # before the database: a full server turns the client away
    try:
        if verified:
            assert isinstance(key, int)
            return await services.backend.login_verified(
                key, services.instance_id, timing=ctx.timing
            )
        return await services.backend.login(key, services.instance_id, timing=ctx.timing)
    except BaseException:
        ctx.seat.log_out()
        raise


async def login_start(ctx: Context, request: frames.LoginStart) -> SessionChange:
    if ctx.session.client is not None:
        raise errors.BadRequest(f"already logged in as {ctx.session.client.name!r}; log out first")
    key = request.client_id if request.client_id is not None else request.name
    if key is None:
        raise errors.BadRequest("log in by client id or by name")
    user = scram.user_name(request.client_id, request.name)
    services = ctx.services
    services.logins.throttle.check(logins.name_key(user), logins.peer_key(ctx.peer))
    ctx.seat.start_login()  # no longer among the anonymous that newcomers push out
    found = await services.backend.auth_verifier(key, timing=ctx.timing)
    client_id, verifier = found if found is not None else (None, None)
    held, nonce, answered = services.logins.challenge(
        user, request.client_nonce, verifier, client_id
    )
    reply = frames.LoginChallenge(nonce, answered.salt, answered.iterations)
    return SessionChange(reply, session.Session(challenge=held))


async def login_proof(ctx: Context, request: frames.LoginProof) -> SessionChange:
    """Check the proof; either way the challenge is used up."""
    held = ctx.session.challenge
    if ctx.session.client is not None or held is None:
        raise errors.BadRequest("send LOGIN_START first: a proof answers its challenge")
    services = ctx.services
    keys = (logins.name_key(held.user), logins.peer_key(ctx.peer))
    try:
        client_id = services.logins.check_proof(held, request.proof)
        client = await take_seat(ctx, client_id, verified=True)
    except errors.CourierError as exc:  # answered here, so that the session drops it
        if isinstance(exc, errors.NotAuthorised):
            services.logins.throttle.failure(*keys)
        ctx.seat.log_out()  # anonymous again
        return SessionChange(frames.ErrorReply(exc.status, exc.message), session.Session())
    services.logins.throttle.success(keys[0])
    signature = scram.server_signature(held.server_key, held.auth_message)
    return SessionChange(frames.LoginReply(client, signature), session.Session(client))


async def set_secret(ctx: Context, request: frames.SetSecret) -> frames.Done:
    actor = ctx.session.require_client()
    target = await client_id_of(ctx, request.client_id, request.name)
    await ctx.services.backend.set_secret(actor.id, target, request.verifier, timing=ctx.timing)
    return frames.Done()


async def set_client_enabled(ctx: Context, request: frames.SetClientEnabled) -> frames.Done:
    actor = ctx.session.require_admin("disable or enable a client")
    target = await client_id_of(ctx, request.client_id, request.name)
    await ctx.services.backend.set_client_enabled(
        actor.id, target, request.enabled, timing=ctx.timing
    )
    return frames.Done()


async def client_id_of(ctx: Context, client_id: int | None, name: str | None) -> int:
    if client_id is not None:
        return client_id
    if name is None:
        raise errors.BadRequest("name the client by id or by name")
    return (await ctx.services.backend.get_client(name, timing=ctx.timing)).id


async def get_client(ctx: Context, request: frames.GetClient) -> frames.ClientIdentityReply:
    """Any logged-in client may look another up by name, so the reply holds its id and
    name only: its mode and whether it is online are not told. By id only an admin
    may, or a client asking after itself: ids are handed out in order, so walking
    them would list every client (docs/protocol.md, "Looking clients up")."""
    if request.client_id is not None and request.name is not None:
        raise errors.BadRequest("look a client up by id or by name, not both")
    key = request.client_id if request.client_id is not None else request.name
    if key is None:
        raise errors.BadRequest("look a client up by id or by name")
    if isinstance(key, int) and key != ctx.session.require_client().id:
        ctx.session.require_admin("look another client up by id")
    found = await ctx.services.backend.get_client(key, timing=ctx.timing)
    return frames.ClientIdentityReply(models.ClientIdentity(found.id, found.name))


async def logout(ctx: Context, request: frames.Logout) -> SessionChange:
    client = ctx.session.require_client()
    await ctx.services.backend.logout(client.id, ctx.services.instance_id, timing=ctx.timing)
    ctx.seat.log_out()
    return SessionChange(frames.Done(), session.Session())


async def create_queue(ctx: Context, request: frames.CreateQueue) -> frames.QueueReply:
    queue = await ctx.services.backend.create_queue(
        request.name,
        creator=ctx.session.require_client().id,
        max_queues=ctx.services.limits.max_queues_per_client,
        timing=ctx.timing,
    )
    return frames.QueueReply(queue)


async def delete_queue(ctx: Context, request: frames.DeleteQueue) -> frames.Done:
    await ctx.services.backend.delete_queue(
        request.queue_id, if_empty=request.if_empty, actor=ctx.session.require_client().id,
        timing=ctx.timing,
    )  # fmt: skip
    return frames.Done()


async def get_queue(ctx: Context, request: frames.GetQueue) -> frames.QueueReply:
    key = request.queue_id if request.queue_id is not None else request.name
    if key is None:
        raise errors.BadRequest("look a queue up by id or by name")
    return frames.QueueReply(await ctx.services.backend.get_queue(key, timing=ctx.timing))


async def list_queues(ctx: Context, request: frames.ListQueues) -> frames.QueueListReply:
    queues = await ctx.services.backend.list_queues(timing=ctx.timing)
    return frames.QueueListReply(tuple(queues))


async def send(ctx: Context, request: frames.Send) -> frames.MessageIdsReply:
    sender = ctx.session.require_writer()
    check_body_size(request.body, ctx.services.limits)
    check_queue_count(request.queue_ids, ctx.services.limits)
    ids = await ctx.services.backend.send(
        sender.id,
        request.queue_ids,
        request.body,
        receiver=request.receiver,
        priority=request.priority,
        context=request.context,
        options=backend.send_options(request),
        timing=ctx.timing,
    )
    ctx.services.due_in(request.delay_ms)
    ctx.services.due_in(request.ttl_ms)
    return frames.MessageIdsReply(tuple(ids))


def check_body_size(body: bytes, limits: config.Limits) -> None:
    if len(body) > limits.max_body_bytes:
        raise errors.PayloadTooLarge(size=len(body), limit=limits.max_body_bytes)


def check_queue_count(queue_ids: Sequence[int], limits: config.Limits) -> None:
    if len(queue_ids) > limits.max_queues_per_send:
        raise errors.BadRequest(
            f"a message goes to at most {limits.max_queues_per_send} queues;"
            f" this one names {len(queue_ids)}"
        )


def wait_seconds(timeout_ms: int, limits: config.Limits) -> float:
    """A waiting request's timeout, within the server's limit."""
    if timeout_ms > limits.max_wait * 1000:
        raise errors.BadRequest(
            f"a wait is at most {limits.max_wait:g}s; {timeout_ms / 1000:g}s was asked:"
            " wait again once it ends"
        )
    return timeout_ms / 1000


def lease_for(ctx: Context, lease_ms: int, *, pop: bool) -> backend.Lease | None:
    """The lease a pop asks for (None: a plain pop, deleted on read)."""
    if not lease_ms:
        return None
    if not pop:
        raise errors.BadRequest("only a pop takes a lease; a peek leaves the message in place")
    ctx.services.due_in(lease_ms)
    return backend.Lease(lease_ms, ctx.services.instance_id)


async def read(ctx: Context, request: frames.Read) -> frames.MessageReply:
    reader_id = ctx.session.require_client().id
    selector = selectors.prepare(request.selector)  # BadSelector before any work
    message = await ctx.services.backend.read(
        reader_id,
        queue_id=request.queue_id,
        sender_id=request.sender_id,
        order=request.order,
        pop=request.pop,
        lease=lease_for(ctx, request.lease_ms, pop=request.pop),
        selector=selector,
        timing=ctx.timing,
    )
    return frames.MessageReply(message)


async def receive(ctx: Context, request: frames.Receive) -> frames.MessageReply:
    reader_id = ctx.session.require_client().id
    selector = selectors.prepare(request.selector)
    lease = lease_for(ctx, request.lease_ms, pop=True)

    async def pop() -> models.Message:
        return await ctx.services.backend.read(
            reader_id,
            queue_id=request.queue_id,
            sender_id=request.sender_id,
            order=request.order,
            pop=True,
            lease=lease,
            selector=selector,
            timing=ctx.timing,
        )

    message = await ctx.services.waiters.wait_for(
        request.queue_id, reader_id, given_back_if_cancelled(ctx, reader_id, pop),
        wait_seconds(request.timeout_ms, ctx.services.limits),
    )  # fmt: skip
    return frames.MessageReply(message)


async def await_response(ctx: Context, request: frames.AwaitResponse) -> frames.MessageReply:
    reader_id = ctx.session.require_client().id

    async def pop() -> models.Message:
        return await ctx.services.backend.pop_response(
            reader_id, request.queue_id, request.context, timing=ctx.timing
        )

    message = await ctx.services.waiters.wait_for(
        request.queue_id, reader_id, given_back_if_cancelled(ctx, reader_id, pop),
        wait_seconds(request.timeout_ms, ctx.services.limits),
    )  # fmt: skip
    return frames.MessageReply(message)


def given_back_if_cancelled(
    ctx: Context, reader_id: int, pop: Callable[[], Awaitable[T]]
) -> Callable[[], Awaitable[T]]:
    """``pop``, except that a waiting request cancelled (CANCEL, or its connection
    closed) while the pop is in flight does not lose what the pop takes: the pop
    finishes, and its message (or messages) go back as they were."""

    async def guarded() -> T:
        attempt = asyncio.ensure_future(pop())
        try:
            return await asyncio.shield(attempt)
        except asyncio.CancelledError:
            await give_back_when_done(ctx, reader_id, attempt)
            raise

    return guarded


async def give_back_when_done(ctx: Context, reader_id: int, attempt: asyncio.Future[Any]) -> None:
    try:
        taken = await attempt
    except Exception:
        return  # the pop took nothing
    await give_back(ctx, reader_id, taken if isinstance(taken, list) else [taken])


async def give_back(ctx: Context, reader_id: int, messages: Sequence[models.Message]) -> None:
    for message in messages:
        try:
            await ctx.services.backend.give_back(reader_id, message)
        except Exception as exc:
            # At-most-once for a plain pop: the message is lost; a lease runs out instead.
            log.warning(
                "could not give back message %d after its receive ended: %s", message.id, exc
            )


async def ack(ctx: Context, request: frames.Ack) -> frames.Done:
    holder = ctx.session.require_client().id
    await ctx.services.backend.ack(holder, request.delivery_id, timing=ctx.timing)
    return frames.Done()


async def nack(ctx: Context, request: frames.Nack) -> frames.Done:
    holder = ctx.session.require_client().id
    await ctx.services.backend.nack(
        holder, request.delivery_id, delay_ms=request.delay_ms, reason=request.reason,
        timing=ctx.timing,
    )  # fmt: skip
    ctx.services.due_in(request.delay_ms)
    return frames.Done()


async def extend(ctx: Context, request: frames.Extend) -> frames.Done:
    holder = ctx.session.require_client().id
    await ctx.services.backend.extend(
        holder, request.delivery_id, request.lease_ms, timing=ctx.timing
    )
    return frames.Done()


async def send_many(ctx: Context, request: frames.SendMany) -> frames.BatchIdsReply:
    sender = ctx.session.require_writer()
    check_batch(request.messages, ctx.services.limits)
    check_queue_count(request.queue_ids, ctx.services.limits)
    ids = await ctx.services.backend.send_many(
        sender.id, request.queue_ids, request.messages, timing=ctx.timing
    )
    ctx.services.due_in(max(draft.delay_ms for draft in request.messages))
    ctx.services.due_in(max(draft.ttl_ms or 0 for draft in request.messages))
    return frames.BatchIdsReply(tuple(tuple(row) for row in ids))


def check_batch(drafts: Sequence[models.Draft], limits: config.Limits) -> None:
    """Before any work: a batch holds a message, and none is too large, nor all."""
    if not drafts:
        raise errors.BadRequest("a batch needs at least one message")
    for number, draft in enumerate(drafts, 1):
        try:
            check_body_size(draft.body, limits)
        except errors.PayloadTooLarge as exc:
            raise errors.in_batch(number, exc) from None
    total = sum(len(draft.body) for draft in drafts)
    total += sum(protocol.properties_size(d.properties) for d in drafts if d.properties)
    if total > limits.max_batch_bytes:
        raise errors.PayloadTooLarge(
            f"the batch's bodies and properties are {total} bytes; a batch holds at most"
            f" {limits.max_batch_bytes}: send it in parts"
        )


async def receive_many(ctx: Context, request: frames.ReceiveMany) -> frames.MessagesReply:
    """Up to max_messages, once there is one (waiting up to timeout_ms for it); with
    min_messages, more until there are that many or max_wait_ms has passed."""
    reader_id = ctx.session.require_client().id
    if not 1 <= request.min_messages <= request.max_messages:
        raise errors.BadRequest(
            f"a batch read takes 1 to {request.max_messages} messages at least"
            f" (max_messages), not {request.min_messages}"
        )
    selector = selectors.prepare(request.selector)
    timeout = wait_seconds(request.timeout_ms, ctx.services.limits)
    window = wait_seconds(request.max_wait_ms, ctx.services.limits)
    lease = lease_for(ctx, request.lease_ms, pop=True)
    taken: list[models.Message] = []

    async def pop_more() -> list[models.Message]:
        messages = await ctx.services.backend.pop_many(
            reader_id, request.queue_id, request.max_messages - len(taken),
            sender_id=request.sender_id, order=request.order, lease=lease, selector=selector,
            timing=ctx.timing,
        )  # fmt: skip
        if not messages:
            raise errors.QueueEmpty()
        return messages

    attempt = given_back_if_cancelled(ctx, reader_id, pop_more)
    wait = ctx.services.waiters.wait_for
    try:
        taken += await wait(request.queue_id, reader_id, attempt, timeout)
        deadline = time.monotonic() + window
        while len(taken) < request.min_messages and (left := deadline - time.monotonic()) > 0:
            taken += await wait(request.queue_id, reader_id, attempt, left)
    except errors.CourierError as exc:
        # The wait ended (NoMessage), or a later try failed (the queue was deleted,
        # the database is out of reach): answer with what was taken; a failure
        # before anything was taken is the answer itself.
        if not taken and not isinstance(exc, errors.NoMessage):
            raise
    except BaseException:
        await give_back(ctx, reader_id, taken)  # cancelled: nobody reads the answer
        raise
    fitting = within_bytes(taken, ctx.services.limits.max_batch_bytes)
    await give_back(ctx, reader_id, taken[len(fitting) :])
    return frames.MessagesReply(tuple(fitting))


def within_bytes(messages: list[models.Message], budget: int) -> list[models.Message]:
    """The first messages whose bodies and properties fit the budget; the first
    always goes."""
    total = 0
    for count, message in enumerate(messages):
        total += len(message.body)
        if message.properties:
            total += protocol.properties_size(message.properties)
        if count and total > budget:
            return messages[:count]
    return messages


async def ack_many(ctx: Context, request: frames.AckMany) -> frames.SettledReply:
    holder = ctx.session.require_client().id
    settled = await ctx.services.backend.ack_many(holder, request.delivery_ids, timing=ctx.timing)
    return frames.SettledReply(tuple(settled))


async def nack_many(ctx: Context, request: frames.NackMany) -> frames.SettledReply:
    holder = ctx.session.require_client().id
    settled = await ctx.services.backend.nack_many(
        holder, request.delivery_ids, delay_ms=request.delay_ms, reason=request.reason,
        timing=ctx.timing,
    )  # fmt: skip
    ctx.services.due_in(request.delay_ms)
    return frames.SettledReply(tuple(settled))


async def cancel(ctx: Context, request: frames.Cancel) -> frames.Done:
    ctx.cancel_waiting(request.request_id)  # already answered: nothing to end
    return frames.Done()


async def configure_queue(
    ctx: Context, request: frames.ConfigureQueue
) -> frames.QueueSettingsReply:
    settings = models.QueueSettings(
        request.queue_id, request.max_deliveries, request.dead_letter_queue,
        request.dead_letter_expired, request.max_messages, request.max_bytes, request.overflow,
    )  # fmt: skip
    configured = await ctx.services.backend.configure_queue(
        settings, actor=ctx.session.require_client().id, timing=ctx.timing
    )
    return frames.QueueSettingsReply(configured)


async def set_queue_acl(ctx: Context, request: frames.SetQueueAcl) -> frames.QueueAclReply:
    """Clients named by name are looked up first (ClientNotFound); the database checks
    that the caller owns the queue or is an admin."""
    actor = ctx.session.require_client().id

    async def ids(clients: tuple[int | str, ...] | None) -> tuple[int, ...] | None:
        if clients is None:
            return None
        return tuple([
            client if isinstance(client, int)
            else (await ctx.services.backend.get_client(client, timing=ctx.timing)).id
            for client in clients
        ])  # fmt: skip

    wanted = models.QueueAcl(
        request.queue_id, await ids(request.senders), await ids(request.readers)
    )
    acl = await ctx.services.backend.set_queue_acl(actor, wanted, timing=ctx.timing)
    return frames.QueueAclReply(acl)


async def get_queue_acl(ctx: Context, request: frames.GetQueueAcl) -> frames.QueueAclReply:
    acl = await ctx.services.backend.queue_acl(
        ctx.session.require_client().id, request.queue_id, timing=ctx.timing
    )
    return frames.QueueAclReply(acl)


async def queues_for_me(ctx: Context, request: frames.QueuesForMe) -> frames.QueueListReply:
    queues = await ctx.services.backend.queues_for_me(
        ctx.session.require_client().id, timing=ctx.timing
    )
    return frames.QueueListReply(tuple(queues))


Handler = Callable[[Context, Any], Awaitable[frames.Reply | SessionChange]]

CHANGES_SESSION = frozenset({Opcode.LOGIN, Opcode.LOGOUT, Opcode.LOGIN_START, Opcode.LOGIN_PROOF})
"""Opcodes whose handlers may return a SessionChange: the connection reads no further
request until such a one is answered, so every request sees the session as it was
when the request arrived."""

HANDLERS: dict[int, Handler] = {
    Opcode.PING: ping,
    Opcode.REGISTER: register,
    Opcode.LOGIN: login,
    Opcode.LOGOUT: logout,
    Opcode.LOGIN_START: login_start,
    Opcode.LOGIN_PROOF: login_proof,
    Opcode.SET_SECRET: set_secret,
    Opcode.SET_CLIENT_ENABLED: set_client_enabled,
    Opcode.GET_CLIENT: get_client,
    Opcode.CREATE_QUEUE: create_queue,
    Opcode.DELETE_QUEUE: delete_queue,
    Opcode.GET_QUEUE: get_queue,
    Opcode.LIST_QUEUES: list_queues,
    Opcode.SEND: send,
    Opcode.READ: read,
    Opcode.RECEIVE: receive,
    Opcode.AWAIT_RESPONSE: await_response,
    Opcode.QUEUES_FOR_ME: queues_for_me,
    Opcode.CANCEL: cancel,
    Opcode.CONFIGURE_QUEUE: configure_queue,
    Opcode.SET_QUEUE_ACL: set_queue_acl,
    Opcode.GET_QUEUE_ACL: get_queue_acl,
    Opcode.ACK: ack,
    Opcode.NACK: nack,
    Opcode.EXTEND: extend,
    Opcode.SEND_MANY: send_many,
    Opcode.RECEIVE_MANY: receive_many,
    Opcode.ACK_MANY: ack_many,
    Opcode.NACK_MANY: nack_many,
    **topic_handlers.HANDLERS,
    **replicated_handlers.HANDLERS,
    Opcode.COMMIT: commit.commit,
}
"""Opcode -> handler; every request opcode has exactly one. Typed by int: an Opcode
is an int, so a frame's opcode number finds its handler without an enum lookup."""
