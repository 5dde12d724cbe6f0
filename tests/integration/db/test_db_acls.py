"""Per-queue access lists (migration 0017), through the repository: every send and
read path refuses an outsider with NOT_AUTHORISED and lets a listed client, the owner
and an admin through."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import asyncpg
import pytest

from courier import errors, models
from courier.db import repository, transactions
from courier.db.repository import (
    Lease,
    PopManyRequest,
    PopRequest,
    ReadRequest,
    SendManyRequest,
    SendOptions,
    SendRequest,
)


@dataclass
class World:
    owner: models.ClientInfo
    admin: models.ClientInfo
    listed: models.ClientInfo
    outsider: models.ClientInfo
    guarded: models.Queue  # send and read lists naming only ``listed``
    open: models.Queue  # no lists
    instance: models.Instance

    @property
    def allowed(self) -> list[models.ClientInfo]:
        return [self.listed, self.owner, self.admin]


@pytest.fixture
async def world(repo: repository.Repository) -> World:
    owner = await repo.register_client("owner")
    admin = await repo.register_client("admin", models.ClientMode.ADMIN)
    listed = await repo.register_client("listed")
    outsider = await repo.register_client("outsider")
    guarded = await repo.create_queue("guarded", creator=owner.id)
    open_ = await repo.create_queue("open", creator=owner.id)
    acl = models.QueueAcl(guarded.id, (listed.id,), (listed.id,))
    assert await repo.set_queue_acl(owner.id, acl) == acl
    instance = await repo.register_instance("127.0.0.1:7400")
    return World(owner, admin, listed, outsider, guarded, open_, instance)


async def test_lists_default_to_anyone_and_only_owner_or_admin_change_or_see_them(
    repo: repository.Repository, world: World
) -> None:
    assert await repo.queue_acl(world.owner.id, world.open.id) == models.QueueAcl(world.open.id)
    for actor in (world.listed, world.outsider):
        with pytest.raises(errors.NotAuthorised, match="owner of queue"):
            await repo.set_queue_acl(actor.id, models.QueueAcl(world.guarded.id))
        with pytest.raises(errors.NotAuthorised):
            await repo.queue_acl(actor.id, world.guarded.id)
    both = (world.outsider.id, world.listed.id, world.listed.id)
    acl = await repo.set_queue_acl(world.admin.id, models.QueueAcl(world.open.id, both, None))
    assert acl == models.QueueAcl(world.open.id, tuple(sorted(set(both))), None)
    with pytest.raises(errors.ClientNotFound):
        await repo.set_queue_acl(world.owner.id, models.QueueAcl(world.open.id, (10**12,)))
    with pytest.raises(errors.QueueNotFound):
        await repo.set_queue_acl(world.owner.id, models.QueueAcl(10**12))
    await repo.set_queue_acl(world.owner.id, models.QueueAcl(world.open.id))
    assert await repo.queue_acl(world.admin.id, world.open.id) == models.QueueAcl(world.open.id)


async def test_single_sends_with_and_without_options(
    repo: repository.Repository, world: World
) -> None:
    for options in (repository.PLAIN_SEND, SendOptions(ttl_ms=60_000, properties={"k": "v"})):
        with pytest.raises(errors.NotAuthorised, match="may not send to queue"):
            await repo.send(world.outsider.id, [world.open.id, world.guarded.id], b"x",
                            options=options)  # fmt: skip
        for client in world.allowed:
            assert len(await repo.send(client.id, [world.guarded.id], b"ok", options=options)) == 1
    assert await repo.send(world.outsider.id, [world.open.id], b"open") != []
    assert (await repo.get_queue(world.guarded.id)).message_count == 6


async def test_a_refused_send_in_a_batch_fails_alone(
    repo: repository.Repository, world: World
) -> None:
    for options in (repository.PLAIN_SEND, SendOptions(properties={"k": "v"})):
        outcome = await repo.exchange([
            SendRequest(world.listed.id, [world.guarded.id], b"a", options=options),
            SendRequest(world.outsider.id, [world.guarded.id], b"b", options=options),
            SendRequest(world.outsider.id, [world.open.id], b"c", options=options),
            SendRequest(world.admin.id, [world.guarded.id], b"d", options=options),
        ])  # fmt: skip
        ok, refused, other, admin = outcome.answers
        assert isinstance(refused, errors.NotAuthorised) and "send list" in str(refused)
        assert all(isinstance(answer, list) for answer in (ok, other, admin))


async def test_send_many_is_all_or_none(repo: repository.Repository, world: World) -> None:
    drafts = [models.Draft(b"1"), models.Draft(b"2")]
    with pytest.raises(errors.NotAuthorised):
        await repo.send_many(world.outsider.id, [world.open.id, world.guarded.id], drafts)
    assert (await repo.get_queue(world.open.id)).message_count == 0
    for client in world.allowed:
        assert len(await repo.send_many(client.id, [world.guarded.id], drafts)) == 2
    outcome = await repo.exchange(
        [
            SendManyRequest(world.outsider.id, [world.guarded.id], drafts),
            SendManyRequest(world.listed.id, [world.guarded.id], drafts),
        ]
    )
    assert isinstance(outcome.answers[0], errors.NotAuthorised)
    assert isinstance(outcome.answers[1], list)


async def test_publish_into_a_guarded_subscription_queue_is_refused_whole(
    repo: repository.Repository, world: World
) -> None:
    await repo.create_topic("news", creator=world.owner.id)
    first = await repo.subscribe(world.owner.id, "news", instance_id=world.instance.id, name="a")
    other = await repo.subscribe(world.owner.id, "news", instance_id=world.instance.id, name="b")
    await repo.set_queue_acl(world.owner.id, models.QueueAcl(first.queue, (world.listed.id,)))
    with pytest.raises(errors.NotAuthorised):
        await repo.publish(world.outsider.id, "news", b"x")
    assert (await repo.get_queue(other.queue)).message_count == 0
    assert len(await repo.publish(world.listed.id, "news", b"y")) == 2
    with pytest.raises(errors.NotAuthorised, match="operation 2"):
        await repo.commit(world.outsider.id, [
            transactions.SendOperation([world.open.id], b"fine"),
            transactions.SendOperation([world.guarded.id], b"refused"),
        ])  # fmt: skip
    assert (await repo.get_queue(world.open.id)).message_count == 0
    await repo.commit(
        world.listed.id,
        [
            transactions.SendOperation([world.guarded.id], b"ok"),
            transactions.PublishOperation("news", b"ok"),
        ],
    )


async def test_every_read_of_a_guarded_queue(repo: repository.Repository, world: World) -> None:
    await repo.send_many(world.owner.id, [world.guarded.id], [models.Draft(b"m")] * 40)
    queue = world.guarded.id
    lease = Lease(30_000, world.instance.id)
    reads = [
        lambda c: repo.read(c, queue_id=queue),
        lambda c: repo.read(c, queue_id=queue, pop=True),
        lambda c: repo.read(c, queue_id=queue, pop=True, lease=lease),
        lambda c: repo.read(c, queue_id=queue, sender_id=world.owner.id, pop=True),
        lambda c: repo.pop_many(c, queue, 2),
        lambda c: repo.pop_many(c, queue, 2, lease=lease),
        lambda c: repo.pop_response(c, queue, 7),
    ]
    for read in reads:
        with pytest.raises(errors.NotAuthorised, match="may not read queue"):
            await read(world.outsider.id)
        for client in world.allowed:
            with contextlib.suppress(errors.NoMessage):  # pop_response: no reply waits
                await read(client.id)
    outcome = await repo.exchange([
        PopRequest(world.outsider.id, queue), PopRequest(world.listed.id, queue),
        PopRequest(world.admin.id, queue), PopRequest(world.outsider.id, world.open.id),
        ReadRequest(world.outsider.id, queue, None, models.Order.TIME, False),
        PopManyRequest(world.outsider.id, queue, 3), PopManyRequest(world.owner.id, queue, 1),
    ])  # fmt: skip
    refused, listed, admin, open_, peek, many, owner = outcome.answers
    assert isinstance(refused, errors.NotAuthorised)
    assert isinstance(listed, models.Message) and isinstance(admin, models.Message)
    assert isinstance(open_, errors.QueueEmpty)
    assert isinstance(peek, errors.NotAuthorised) and isinstance(many, errors.NotAuthorised)
    assert isinstance(owner, list) and len(owner) == 1


async def test_reads_by_sender_and_queues_for_me_skip_unreadable_queues(
    repo: repository.Repository, world: World
) -> None:
    await repo.send(world.owner.id, [world.guarded.id], b"hidden")
    with pytest.raises(errors.NoMessage):
        await repo.read(world.outsider.id, sender_id=world.owner.id, pop=True)
    assert [q.id for q in await repo.queues_for_me(world.outsider.id)] == []
    await repo.send(world.owner.id, [world.open.id], b"visible")
    got = await repo.read(world.outsider.id, sender_id=world.owner.id, pop=True)
    assert got.body == b"visible"
    assert [q.id for q in await repo.queues_for_me(world.outsider.id)] == []
    for client in world.allowed:
        assert [q.id for q in await repo.queues_for_me(client.id)] == [world.guarded.id]
    got = await repo.read(world.listed.id, sender_id=world.owner.id)
    assert got.body == b"hidden"
    got = await repo.read(world.admin.id, sender_id=world.owner.id, pop=True)
    assert got.body == b"hidden"


async def test_older_versions_check_the_lists_too(dsn: str, world: World) -> None:
    connection = await asyncpg.connect(dsn)
    try:
        reads = [
            "SELECT * FROM courier_read_v2($1, $2, NULL, 'time', true, 0, NULL)",
            "SELECT * FROM courier_pop_response_v2($1, $2, 7)",
            "SELECT * FROM courier_pop_many_v1($1, $2, NULL, 'time', 5, 0, NULL)",
        ]
        for query in reads:
            with pytest.raises(asyncpg.PostgresError, match="read list"):
                await connection.fetch(query, world.outsider.id, world.guarded.id)
        rows = await connection.fetch(
            "SELECT * FROM courier_pop_batch_v2($1, 'time', $2)",
            world.guarded.id, [world.outsider.id, world.listed.id],
        )  # fmt: skip
        assert sorted((row["request"], row["status"]) for row in rows) == [(1, 13), (2, 5)]
        with pytest.raises(asyncpg.PostgresError, match="send list"):
            await connection.fetch(
                "SELECT * FROM courier_send_many_v1($1, $2, $3, $4, $5, $6, $7, $8, $9,"
                " 65536, 60000)",
                world.outsider.id, [world.guarded.id], [b"x"], [None], [5], [None], [0],
                [None], [None],
            )  # fmt: skip
        ids = await connection.fetchval(
            "SELECT ids FROM courier_queues_for_me_v1($1)", world.outsider.id
        )
        assert world.guarded.id not in ids
    finally:
        await connection.close()
