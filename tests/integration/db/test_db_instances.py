"""The middleware instance registry: heartbeats, liveness, expiry, release of sessions."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from courier import errors
from courier.db import repository


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

    assert await repo.expire_instances(10) == [dead.id]

    assert [instance.id for instance in await repo.list_instances()] == [live.id]
    assert (await repo.get_client(alice.id)).online is True
    assert (await repo.get_client(bob.id)).online is False
    assert (await repo.login(bob.id, live.id)).online is True
    assert await repo.expire_instances(10) == []


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
