"""Every opcode and every request-level error code, end to end through `courier serve`."""

from __future__ import annotations

import time

import asyncpg
from server_harness import Connect, log_in_new, raw_frame

from courier import models
from courier.errors import Status
from courier.protocol import frames
from courier.protocol.constants import Opcode
from helpers.servers import ServerProcess

TIME = models.Order.TIME
PRIORITY = models.Order.PRIORITY


def send(queue_ids: tuple[int, ...], body: str | bytes, **options: object) -> frames.Send:
    fields: dict[str, object] = {"receiver": None, "priority": 5, "context": None, **options}
    data = body.encode() if isinstance(body, str) else body
    return frames.Send(queue_ids=queue_ids, body=data, **fields)  # type: ignore[arg-type]


async def test_ping_answers_with_the_server_clock(server: ServerProcess, connect: Connect) -> None:
    client = await connect(server)
    before = time.time_ns()
    reply = await client.ok(frames.Ping())
    assert isinstance(reply, frames.Pong)
    assert before - 1_000_000_000 < reply.server_time_ns < time.time_ns() + 1_000_000_000


async def test_register_and_login_by_id_and_by_name(
    server: ServerProcess, connect: Connect
) -> None:
    first, second = await connect(server), await connect(server)
    registered = await first.ok(frames.Register("alice", models.ClientMode.READ_ONLY))
    assert isinstance(registered, frames.ClientReply)
    assert registered.client.name == "alice"
    assert registered.client.mode is models.ClientMode.READ_ONLY
    assert await first.error(frames.Register("alice", models.ClientMode.READ_WRITE)) == (
        Status.CLIENT_EXISTS
    )
    by_name = await first.ok(frames.Login(client_id=None, name="alice"))
    assert isinstance(by_name, frames.ClientReply)
    assert by_name.client.id == registered.client.id and by_name.client.online
    # One live session per client, wherever it is.
    online = frames.Login(client_id=registered.client.id, name=None)
    assert await second.error(online) == Status.CLIENT_ONLINE
    assert await second.error(frames.Login(client_id=None, name="nobody")) == (
        Status.CLIENT_NOT_FOUND
    )
    assert await second.error(frames.Login(client_id=999_999, name=None)) == (
        Status.CLIENT_NOT_FOUND
    )
    assert isinstance(await first.ok(frames.Logout()), frames.Done)
    assert isinstance(await second.ok(online), frames.ClientReply)


async def test_get_client_by_name_tells_its_id_and_name_only(
    server: ServerProcess, connect: Connect
) -> None:
    asker_conn, bob_conn = await connect(server), await connect(server)
    asker = await log_in_new(asker_conn, "asker")
    bob = await log_in_new(bob_conn, "bob", models.ClientMode.READ_ONLY)
    bob_only = frames.ClientIdentityReply(models.ClientIdentity(bob.id, "bob"))
    assert await asker_conn.ok(frames.GetClient(None, "bob")) == bob_only
    # By id, a client may ask after itself only: walking the ids would list everyone.
    assert await asker_conn.error(frames.GetClient(bob.id, None)) == Status.NOT_AUTHORISED
    assert await asker_conn.error(frames.GetClient(999_999, None)) == Status.NOT_AUTHORISED
    by_own_id = await asker_conn.ok(frames.GetClient(asker.id, None))
    assert by_own_id == frames.ClientIdentityReply(models.ClientIdentity(asker.id, "asker"))

    missing = await asker_conn.call(frames.GetClient(None, "carol"))
    assert isinstance(missing, frames.ErrorReply)
    assert (missing.status, missing.message) == (Status.CLIENT_NOT_FOUND, "no client carol")

    # Neither (lookup code 0) nor both (an id, then a name) can be encoded: sent by
    # hand, each is BAD_REQUEST and the connection goes on.
    neither = b"\x00"
    both = b"\x01" + bob.id.to_bytes(8, "big") + b"\x02\x00\x03bob"
    for request_id, body in ((901, neither), (902, both)):
        asker_conn.send_raw(raw_frame(Opcode.GET_CLIENT, request_id, body))
        raw, reply = await asker_conn.next_unsolicited()
        assert (raw.request_id, raw.opcode) == (request_id, Opcode.GET_CLIENT)
        assert isinstance(reply, frames.ErrorReply) and reply.status == Status.BAD_REQUEST
    itself = await asker_conn.ok(frames.GetClient(None, "asker"))
    assert itself == frames.ClientIdentityReply(models.ClientIdentity(asker.id, "asker"))


async def test_queue_lifecycle(server: ServerProcess, connect: Connect) -> None:
    client = await connect(server)
    await log_in_new(client, "admin")
    created = await client.ok(frames.CreateQueue("jobs"))
    assert isinstance(created, frames.QueueReply)
    jobs = created.queue
    assert (jobs.name, jobs.message_count) == ("jobs", 0)
    assert await client.error(frames.CreateQueue("jobs")) == Status.QUEUE_EXISTS
    assert await client.error(frames.CreateQueue("")) == Status.BAD_REQUEST
    other = await client.ok(frames.CreateQueue("other"))
    assert isinstance(other, frames.QueueReply)

    await client.ok(send((jobs.id,), "one"))
    by_id = await client.ok(frames.GetQueue(queue_id=jobs.id, name=None))
    by_name = await client.ok(frames.GetQueue(queue_id=None, name="jobs"))
    assert by_id == by_name == frames.QueueReply(models.Queue(jobs.id, "jobs", 1))
    listed = await client.ok(frames.ListQueues())
    assert listed == frames.QueueListReply(
        (models.Queue(jobs.id, "jobs", 1), models.Queue(other.queue.id, "other", 0))
    )
    assert await client.error(frames.GetQueue(queue_id=None, name="nope")) == (
        Status.QUEUE_NOT_FOUND
    )

    assert await client.error(frames.DeleteQueue(jobs.id, if_empty=True)) == (
        Status.QUEUE_NOT_EMPTY
    )
    assert isinstance(await client.ok(frames.DeleteQueue(jobs.id, if_empty=False)), frames.Done)
    assert await client.error(frames.DeleteQueue(jobs.id, if_empty=False)) == (
        Status.QUEUE_NOT_FOUND
    )
    assert isinstance(
        await client.ok(frames.DeleteQueue(other.queue.id, if_empty=True)), frames.Done
    )
    assert await client.ok(frames.ListQueues()) == frames.QueueListReply(())


async def test_send_read_and_addressing(server: ServerProcess, connect: Connect) -> None:
    alice_conn, bob_conn = await connect(server), await connect(server)
    alice = await log_in_new(alice_conn, "alice")
    bob = await log_in_new(bob_conn, "bob")
    a = (await alice_conn.ok(frames.CreateQueue("a"))).queue  # type: ignore[union-attr]
    b = (await alice_conn.ok(frames.CreateQueue("b"))).queue  # type: ignore[union-attr]

    sent = await alice_conn.ok(send((a.id, b.id), "hello", priority=2))
    assert isinstance(sent, frames.MessageIdsReply) and len(set(sent.ids)) == 2
    await alice_conn.ok(send((a.id,), "urgent", priority=9))
    await alice_conn.ok(send((a.id,), "for bob", receiver=bob.id, context=77))

    peek = await bob_conn.ok(frames.Read(a.id, None, PRIORITY, pop=False))
    assert isinstance(peek, frames.MessageReply)
    assert (peek.message.text, peek.message.priority) == ("urgent", 9)
    assert peek.message.sender == alice.id
    popped = await bob_conn.ok(frames.Read(a.id, None, TIME, pop=True))
    assert isinstance(popped, frames.MessageReply)
    assert (popped.message.id, popped.message.queue) == (sent.ids[0], a.id)

    # Alice may not see what is addressed to Bob.
    for_me = await alice_conn.ok(frames.QueuesForMe())
    assert for_me == frames.QueueListReply((models.Queue(a.id, "a", 1), models.Queue(b.id, "b", 1)))
    bobs = await bob_conn.ok(frames.QueuesForMe())
    assert bobs == frames.QueueListReply((models.Queue(a.id, "a", 2), models.Queue(b.id, "b", 1)))

    by_sender = await bob_conn.ok(frames.Read(None, alice.id, TIME, pop=True))
    assert isinstance(by_sender, frames.MessageReply) and by_sender.message.queue == b.id
    urgent = await bob_conn.ok(frames.Read(a.id, None, PRIORITY, pop=True))
    assert isinstance(urgent, frames.MessageReply) and urgent.message.text == "urgent"
    private = await bob_conn.ok(frames.Read(a.id, None, TIME, pop=True))
    assert isinstance(private, frames.MessageReply)
    assert (private.message.text, private.message.receiver) == ("for bob", bob.id)
    assert private.message.context == 77

    assert await alice_conn.error(frames.Read(b.id, None, TIME, pop=True)) == Status.QUEUE_EMPTY
    assert await alice_conn.error(frames.Read(None, bob.id, TIME, pop=False)) == Status.NO_MESSAGE
    assert await alice_conn.error(frames.Read(None, None, TIME, pop=False)) == Status.BAD_REQUEST
    assert await alice_conn.error(frames.Read(999, None, TIME, pop=False)) == (
        Status.QUEUE_NOT_FOUND
    )


async def test_send_errors(server: ServerProcess, connect: Connect) -> None:
    client = await connect(server)
    await log_in_new(client, "writer")
    queue = (await client.ok(frames.CreateQueue("q"))).queue  # type: ignore[union-attr]
    assert await client.error(send((queue.id, 999_999), "x")) == Status.QUEUE_NOT_FOUND
    assert await client.error(send((queue.id,), "x", priority=11)) == Status.INVALID_PRIORITY
    assert await client.error(send((queue.id,), "x", priority=0)) == Status.INVALID_PRIORITY
    assert await client.error(send((), "x")) == Status.BAD_REQUEST
    # Nothing of the failed sends was stored.
    assert await client.ok(frames.GetQueue(queue.id, None)) == frames.QueueReply(queue)


async def test_request_and_response_by_context(server: ServerProcess, connect: Connect) -> None:
    asker_conn, worker_conn = await connect(server), await connect(server)
    asker = await log_in_new(asker_conn, "asker")
    await log_in_new(worker_conn, "worker")
    queue = (await asker_conn.ok(frames.CreateQueue("rpc"))).queue  # type: ignore[union-attr]
    await worker_conn.ok(send((queue.id,), "other answer", receiver=asker.id, context=1))
    await worker_conn.ok(send((queue.id,), "the answer", receiver=asker.id, context=2))

    answer = await asker_conn.ok(frames.AwaitResponse(queue.id, context=2, timeout_ms=1000))
    assert isinstance(answer, frames.MessageReply) and answer.message.text == "the answer"
    missing = frames.AwaitResponse(queue.id, context=3, timeout_ms=0)
    assert await asker_conn.error(missing) == Status.NO_MESSAGE
    assert await asker_conn.error(frames.AwaitResponse(999, 1, 0)) == Status.QUEUE_NOT_FOUND
    received = await asker_conn.ok(frames.Receive(queue.id, None, TIME, timeout_ms=0))
    assert isinstance(received, frames.MessageReply) and received.message.text == "other answer"


async def test_unexpected_database_failure_is_internal_and_connection_survives(
    dsn: str, server: ServerProcess, connect: Connect
) -> None:
    client = await connect(server)
    await log_in_new(client, "victim")
    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute("DROP FUNCTION courier_list_queues_v2")
    finally:
        await connection.close()
    assert await client.error(frames.ListQueues()) == Status.INTERNAL
    assert isinstance(await client.ok(frames.CreateQueue("still fine")), frames.QueueReply)
