"""Properties of authentication and authorisation over random sequences of operations
by several clients, against a real middleware that requires secrets:

- nothing succeeds without a valid login (no login, or a wrong secret);
- no client ever reads a message addressed to another client;
- a queue is deleted or configured only by its owner or an admin, and anyone else
  is refused with NOT_AUTHORISED;
- a topic is deleted only by its owner or an admin; a subscription is ended only by
  its subscriber, the topic's owner or an admin, and resumed only by its subscriber;
- a read-only client never sends;
- no client sends to or reads from a queue whose access lists leave it out (its
  owner and admins always may), and only the owner or an admin sets the lists.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import courier
from courier import errors, models, scram
from courier.db import repository
from helpers.servers import ServerProcess, StartServer, address

ACTORS = ("ann", "ben", "cat", "ro", "boss")  # ro is read-only, boss an admin
QUEUES = 3
TOPICS = 2
_runs = itertools.count()

# An access list: None (anyone), or some of the plain writers.
LISTS = st.one_of(st.none(), st.frozensets(st.sampled_from(("ann", "ben", "cat"))))

operations = st.lists(
    st.one_of(
        st.tuples(st.just("create"), st.sampled_from(ACTORS), st.integers(0, QUEUES - 1)),
        st.tuples(st.just("delete"), st.sampled_from(ACTORS), st.integers(0, QUEUES - 1)),
        st.tuples(st.just("configure"), st.sampled_from(ACTORS), st.integers(0, QUEUES - 1)),
        st.tuples(
            st.just("send"),
            st.sampled_from(ACTORS),
            st.integers(0, QUEUES - 1),
            st.sampled_from((None, *ACTORS)),
        ),
        st.tuples(st.just("pop"), st.sampled_from(ACTORS), st.integers(0, QUEUES - 1)),
        st.tuples(st.just("take"), st.sampled_from(ACTORS), st.integers(0, QUEUES - 1)),
        st.tuples(st.just("topic-create"), st.sampled_from(ACTORS), st.integers(0, TOPICS - 1)),
        st.tuples(st.just("topic-delete"), st.sampled_from(ACTORS), st.integers(0, TOPICS - 1)),
        st.tuples(
            st.just("subscribe"),
            st.sampled_from(ACTORS),
            st.integers(0, TOPICS - 1),
            st.sampled_from(ACTORS),  # whose name the subscription takes
        ),
        st.tuples(
            st.just("unsubscribe"),
            st.sampled_from(ACTORS),
            st.integers(0, TOPICS - 1),
            st.sampled_from(ACTORS),
        ),
        st.tuples(
            st.just("acl"),
            st.sampled_from(ACTORS),
            st.integers(0, QUEUES - 1),
            LISTS,
            LISTS,
        ),
        st.tuples(st.just("anonymous"), st.sampled_from(("create", "send", "pop", "delete"))),
        st.tuples(st.just("wrong-secret"), st.sampled_from(ACTORS)),
    ),
    min_size=1,
    max_size=25,
)


@dataclass
class World:
    """What the test expects of the system: who owns which queue."""

    prefix: str
    ids: dict[str, int] = field(default_factory=dict)
    owners: dict[int, str] = field(default_factory=dict)  # queue index -> owner, if it exists
    topic_owners: dict[int, str] = field(default_factory=dict)  # topic index -> owner
    # (topic index, the actor it is named after) -> (its queue id, its subscriber)
    subscriptions: dict[tuple[int, str], tuple[int, str]] = field(default_factory=dict)
    senders: dict[int, frozenset[str]] = field(default_factory=dict)  # absent: anyone
    readers: dict[int, frozenset[str]] = field(default_factory=dict)

    def queue(self, index: int) -> str:
        return f"{self.prefix}-q{index}"

    def topic(self, index: int) -> str:
        return f"{self.prefix}-t{index}"

    def may_change(self, actor: str, index: int) -> bool:
        return self.owners.get(index) == actor or actor == "boss"

    def may(self, actor: str, index: int, lists: dict[int, frozenset[str]]) -> bool:
        return index not in lists or actor in lists[index] or self.may_change(actor, index)


@pytest.fixture
async def secure(start_server: StartServer) -> ServerProcess:
    # Lockouts are tested on their own: here a wrong guess must not lock out the next.
    return await start_server(open_login=False, max_login_failures=10_000)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=operations)
def test_no_operation_passes_the_rules_of_login_ownership_and_addressing(
    secure: ServerProcess, dsn: str, ops: list[tuple[object, ...]]
) -> None:
    asyncio.run(run_scenario(address(secure), dsn, ops))


async def run_scenario(server: str, dsn: str, ops: list[tuple[object, ...]]) -> None:
    world = World(f"p{next(_runs)}")
    clients = await log_everyone_in(server, dsn, world)
    try:
        for op in ops:
            await apply(server, world, clients, op)
    finally:
        for client in clients.values():
            await client.close()


def secret_of(world: World, actor: str) -> str:
    return f"{world.prefix}-{actor}-secret"


async def log_everyone_in(server: str, dsn: str, world: World) -> dict[str, courier.AsyncClient]:
    repo = await repository.Repository.connect(dsn)
    try:
        for actor in ACTORS:
            mode = {"ro": models.ClientMode.READ_ONLY, "boss": models.ClientMode.ADMIN}.get(
                actor, models.ClientMode.READ_WRITE
            )
            verifier = scram.verifier(secret_of(world, actor), iterations=scram.MIN_ITERATIONS)
            info = await repo.register_client(f"{world.prefix}-{actor}", mode, verifier=verifier)
            world.ids[actor] = info.id
    finally:
        await repo.close()
    return {
        actor: await courier.AsyncClient.connect(
            server, name=f"{world.prefix}-{actor}", secret=secret_of(world, actor)
        )
        for actor in ACTORS
    }


async def apply(
    server: str, world: World, clients: dict[str, courier.AsyncClient], op: tuple[object, ...]
) -> None:
    kind = op[0]
    if kind == "anonymous":
        await anonymous(server, world, str(op[1]))
    elif kind == "wrong-secret":
        with pytest.raises(errors.NotAuthorised, match="login failed"):
            await courier.AsyncClient.connect(
                server, name=f"{world.prefix}-{op[1]}", secret="a guess"
            )
    else:
        actor, index = str(op[1]), int(op[2])  # type: ignore[call-overload]
        await ACTIONS[str(kind)](world, clients[actor], actor, index, *op[3:])


async def anonymous(server: str, world: World, what: str) -> None:
    async with courier.AsyncClient.connect(server) as nobody:
        with pytest.raises(errors.NotLoggedIn):
            if what == "create":
                await nobody.create_queue(world.queue(0) + "-anon")
            elif what == "send":
                await nobody.send(1, "sneaky")
            elif what == "pop":
                await nobody.pop(1)
            else:
                await nobody.delete_queue(1)


async def create(world: World, client: courier.AsyncClient, actor: str, index: int) -> None:
    if index in world.owners:
        with pytest.raises(errors.QueueExists):
            await client.create_queue(world.queue(index))
        return
    await client.create_queue(world.queue(index))
    world.owners[index] = actor


async def delete(world: World, client: courier.AsyncClient, actor: str, index: int) -> None:
    if index not in world.owners:
        with pytest.raises(errors.QueueNotFound):
            await client.delete_queue(world.queue(index))
    elif not world.may_change(actor, index):
        with pytest.raises(errors.NotAuthorised, match="only the owner"):
            await client.delete_queue(world.queue(index))
    else:
        await client.delete_queue(world.queue(index))
        del world.owners[index]
        world.senders.pop(index, None)
        world.readers.pop(index, None)


async def configure(world: World, client: courier.AsyncClient, actor: str, index: int) -> None:
    if index not in world.owners:
        with pytest.raises(errors.QueueNotFound):
            await client.configure_queue(world.queue(index), max_deliveries=4)
    elif not world.may_change(actor, index):
        with pytest.raises(errors.NotAuthorised, match="only the owner"):
            await client.configure_queue(world.queue(index), max_deliveries=4)
    else:
        settings_ = await client.configure_queue(world.queue(index), max_deliveries=4)
        assert settings_.max_deliveries == 4


async def send(
    world: World, client: courier.AsyncClient, actor: str, index: int, to: str | None
) -> None:
    receiver = None if to is None else world.ids[to]
    body = f"from {actor} to {to}"
    if index not in world.owners:
        with pytest.raises(errors.QueueNotFound):
            await client.send(world.queue(index), body, receiver=receiver)
    elif actor == "ro":
        with pytest.raises(errors.NotAuthorised, match="read-only"):
            await client.send(world.queue(index), body, receiver=receiver)
    elif not world.may(actor, index, world.senders):
        with pytest.raises(errors.NotAuthorised, match="send list"):
            await client.send(world.queue(index), body, receiver=receiver)
    else:
        await client.send(world.queue(index), body, receiver=receiver)


async def pop(world: World, client: courier.AsyncClient, actor: str, index: int) -> None:
    if index not in world.owners:
        with pytest.raises(errors.QueueNotFound):
            await client.pop(world.queue(index))
        return
    if not world.may(actor, index, world.readers):
        with pytest.raises(errors.NotAuthorised, match="read list"):
            await client.pop(world.queue(index))
        return
    message = await client.pop(world.queue(index))
    check_addressed_to(world, actor, [] if message is None else [message])


async def take(world: World, client: courier.AsyncClient, actor: str, index: int) -> None:
    """A batch read with a lease, acknowledged: the batched data path."""
    if index not in world.owners:
        with pytest.raises(errors.QueueNotFound):
            await client.receive_many(world.queue(index), max_messages=10, lease=5)
        return
    if not world.may(actor, index, world.readers):
        with pytest.raises(errors.NotAuthorised, match="read list"):
            await client.receive_many(world.queue(index), max_messages=10, lease=5)
        return
    batch = await client.receive_many(world.queue(index), max_messages=10, lease=5)
    check_addressed_to(world, actor, batch)
    if batch:
        assert all(result.ok for result in await client.ack_many(batch))


async def acl(
    world: World,
    client: courier.AsyncClient,
    actor: str,
    index: int,
    senders: frozenset[str] | None,
    readers: frozenset[str] | None,
) -> None:
    def names(actors: frozenset[str] | None) -> list[str] | None:
        return None if actors is None else [f"{world.prefix}-{a}" for a in sorted(actors)]

    async def change() -> models.QueueAcl:
        return await client.set_queue_acl(
            world.queue(index), senders=names(senders), readers=names(readers)
        )

    if index not in world.owners:
        with pytest.raises(errors.QueueNotFound):
            await change()
    elif not world.may_change(actor, index):
        with pytest.raises(errors.NotAuthorised, match="only the owner"):
            await change()
    else:
        got = await change()
        assert got.senders == (
            None if senders is None else tuple(sorted(world.ids[a] for a in senders))
        )
        for lists, wanted in ((world.senders, senders), (world.readers, readers)):
            if wanted is None:
                lists.pop(index, None)
            else:
                lists[index] = wanted


def check_addressed_to(world: World, actor: str, messages: list[models.Message]) -> None:
    for message in messages:
        assert message.receiver in (None, world.ids[actor])
        assert message.text.endswith(f" to {actor}" if message.receiver else " to None")


async def topic_create(world: World, client: courier.AsyncClient, actor: str, index: int) -> None:
    if index in world.topic_owners:
        with pytest.raises(errors.TopicExists):
            await client.create_topic(world.topic(index))
        return
    await client.create_topic(world.topic(index))
    world.topic_owners[index] = actor


async def topic_delete(world: World, client: courier.AsyncClient, actor: str, index: int) -> None:
    if index not in world.topic_owners:
        with pytest.raises(errors.TopicNotFound):
            await client.delete_topic(world.topic(index))
    elif actor not in (world.topic_owners[index], "boss"):
        with pytest.raises(errors.NotAuthorised, match="only the owner of topic"):
            await client.delete_topic(world.topic(index))
    else:
        await client.delete_topic(world.topic(index))
        del world.topic_owners[index]
        for key in [key for key in world.subscriptions if key[0] == index]:
            del world.subscriptions[key]


async def subscribe(
    world: World, client: courier.AsyncClient, actor: str, index: int, holder: str
) -> None:
    name, existing = f"{world.prefix}-{holder}", world.subscriptions.get((index, holder))
    if index not in world.topic_owners:
        with pytest.raises(errors.TopicNotFound):
            await client.subscribe(world.topic(index), name=name)
    elif existing is not None and existing[1] != actor:
        with pytest.raises(errors.NotAuthorised, match="only its subscriber may resume"):
            await client.subscribe(world.topic(index), name=name)
    else:
        made = await client.subscribe(world.topic(index), name=name)
        assert existing is None or made.queue == existing[0]  # resumed
        world.subscriptions[index, holder] = (made.queue, actor)


async def unsubscribe(
    world: World, client: courier.AsyncClient, actor: str, index: int, holder: str
) -> None:
    if (index, holder) not in world.subscriptions:
        return  # no queue id to name
    queue, subscriber = world.subscriptions[index, holder]
    if actor not in (subscriber, world.topic_owners[index], "boss"):
        with pytest.raises(errors.NotAuthorised, match="only its subscriber, the owner"):
            await client.unsubscribe(queue)
        return
    await client.unsubscribe(queue)
    del world.subscriptions[index, holder]


ACTIONS = {
    "topic-create": topic_create,
    "topic-delete": topic_delete,
    "subscribe": subscribe,
    "unsubscribe": unsubscribe,
    "create": create,
    "delete": delete,
    "configure": configure,
    "send": send,
    "pop": pop,
    "take": take,
    "acl": acl,
}
