"""The middleware instance registry: heartbeats, liveness, expiry, release of sessions."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from courier import errors
from courier.db import listen, repository


async def age_heartbeat(pool: asyncpg.Pool, instance_id: int, seconds: float) -> None:
    """Pretend the instance last beat `seconds` ago."""
    await pool.execute(
        "UPDATE courier_instances SET heartbeat_at = now() - make_interval(secs => $2)"
        " WHERE id = $1",
        instance_id,
        seconds,
    )


async def test_register_then_list(repo: repository.Repository) -> None:
    first = await repo.register_instance("127.0.0.1:7400")
    second = await repo.register_instance("127.0.0.1:7401")

    assert first.address == "127.0.0.1:7400"
    assert first.heartbeat_at >= first.started_at
    assert await repo.list_instances() == [first, second]


async def test_heartbeat_moves_the_heartbeat_forward(repo: repository.Repository) -> None:
    instance = await repo.register_instance("127.0.0.1:7400")
    await asyncio.sleep(0.01)

    await repo.heartbeat(instance.id)

    (listed,) = await repo.list_instances()
    assert listed.heartbeat_at > instance.heartbeat_at
    assert listed.started_at == instance.started_at


async def test_heartbeat_of_an_expired_instance_fails(repo: repository.Repository) -> None:
    with pytest.raises(errors.InternalError, match="not registered"):
        await repo.heartbeat(12345)


async def test_list_shows_only_instances_within_their_ttl(
    repo: repository.Repository, pool: asyncpg.Pool
) -> None:
    live = await repo.register_instance("127.0.0.1:7400", ttl_seconds=10)
    silent = await repo.register_instance("127.0.0.1:7401", ttl_seconds=10)
    await age_heartbeat(pool, silent.id, 11)

    assert [instance.id for instance in await repo.list_instances()] == [live.id]


async def test_expire_deletes_silent_instances_and_releases_their_sessions(
    repo: repository.Repository, pool: asyncpg.Pool
) -> None:
    live = await repo.register_instance("127.0.0.1:7400")
    dead = await repo.register_instance("127.0.0.1:7401")
    alice = await repo.register_client("alice")
    bob = await repo.register_client("bob")
    await repo.login(alice.id, live.id)
    await repo.login(bob.id, dead.id)
    await age_heartbeat(pool, dead.id, 30)

    assert await repo.expire_instances() == [dead.id]

    assert [instance.id for instance in await repo.list_instances()] == [live.id]
    assert (await repo.get_client(alice.id)).online is True
    assert (await repo.get_client(bob.id)).online is False
    assert (await repo.login(bob.id, live.id)).online is True
    assert await repo.expire_instances() == []


async def test_unregister_releases_sessions(repo: repository.Repository) -> None:
    instance = await repo.register_instance("127.0.0.1:7400")
    alice = await repo.register_client("alice")
    await repo.login(alice.id, instance.id)

    await repo.unregister_instance(instance.id)

    assert await repo.list_instances() == []
    assert (await repo.get_client(alice.id)).online is False


async def test_ttl_must_be_positive(repo: repository.Repository) -> None:
    with pytest.raises(errors.BadRequest):
        await repo.register_instance("127.0.0.1:7400", ttl_seconds=0)


async def test_an_instance_whose_liveness_lock_is_free_is_reaped_at_once(
    repo: repository.Repository, dsn: str
) -> None:
    me, alive, dead = [await repo.register_instance(f"127.0.0.1:{n}") for n in (1, 2, 3)]
    client = await repo.register_client("left-behind")
    await repo.login(client.id, dead.id)
    holder = await asyncpg.connect(dsn)  # stands in for the live instance's LISTEN link
    try:
        await holder.execute(listen.LOCK, listen.LIVENESS_LOCK_CLASS, alive.id)
        assert await repo.reap_instances(me.id) == []  # a new instance has a grace
        await asyncio.sleep(1.1)
        assert await repo.reap_instances(me.id) == [dead.id]
        listed = {instance.id for instance in await repo.list_instances()}
        assert listed == {me.id, alive.id}
        assert not (await repo.get_client(client.id)).online
    finally:
        await holder.close()


async def test_a_login_takes_over_the_session_of_a_dead_instance(
    repo: repository.Repository,
) -> None:
    dead, survivor = [await repo.register_instance(f"127.0.0.1:{n}") for n in (1, 2)]
    client = await repo.register_client("moving")
    await repo.login(client.id, dead.id)
    with pytest.raises(errors.ClientOnline):  # within the new instance's grace
        await repo.login(client.id, survivor.id)
    await asyncio.sleep(1.1)
    assert (await repo.login(client.id, survivor.id)).online
    assert dead.id not in {instance.id for instance in await repo.list_instances()}


async def test_each_instance_is_expired_by_its_own_ttl(
    repo: repository.Repository, pool: asyncpg.Pool
) -> None:
    patient = await repo.register_instance("127.0.0.1:7400", ttl_seconds=60)
    hasty = await repo.register_instance("127.0.0.1:7401", ttl_seconds=5)
    for instance in (patient, hasty):
        await age_heartbeat(pool, instance.id, 30)
    assert await repo.expire_instances() == [hasty.id]
    assert [instance.id for instance in await repo.list_instances()] == [patient.id]
