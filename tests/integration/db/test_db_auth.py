"""The stored functions of credentials and roles (migration 0013), called directly."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from courier import errors, models, scram
from courier.db import repository


@pytest.fixture
async def instance(repo: repository.Repository) -> models.Instance:
    return await repo.register_instance("127.0.0.1:7400")


async def admin_and_client(
    repo: repository.Repository,
) -> tuple[models.ClientInfo, models.ClientInfo]:
    root = await repo.register_client(
        "root", models.ClientMode.ADMIN, verifier=scram.verifier("root's")
    )
    plain = await repo.register_client("plain", verifier=scram.verifier("plain's"))
    return root, plain


async def test_a_verifier_is_stored_and_found_by_id_or_name(repo: repository.Repository) -> None:
    verifier = scram.verifier("s3cret", iterations=scram.MIN_ITERATIONS)
    info = await repo.register_client("alice", verifier=verifier)
    assert await repo.auth_verifier("alice") == (info.id, verifier)
    assert await repo.auth_verifier(info.id) == (info.id, verifier)
    assert await repo.auth_verifier("nobody") is None
    await repo.register_client("no-secret")
    assert await repo.auth_verifier("no-secret") is None


async def test_a_weak_verifier_is_refused(repo: repository.Repository) -> None:
    good = scram.verifier("x", iterations=scram.MIN_ITERATIONS)
    for weak in (
        models.Verifier(good.salt, 1000, good.stored_key, good.server_key),
        models.Verifier(b"short", good.iterations, good.stored_key, good.server_key),
        models.Verifier(good.salt, good.iterations, good.stored_key[:16], good.server_key),
    ):
        with pytest.raises(errors.BadRequest, match="verifier"):
            await repo.register_client("weak", verifier=weak)


async def test_an_admin_is_reported_as_one_and_sends_like_a_writer(
    repo: repository.Repository, instance: models.Instance
) -> None:
    root, plain = await admin_and_client(repo)
    assert root.mode is models.ClientMode.ADMIN and plain.mode is models.ClientMode.READ_WRITE
    assert await repo.is_admin(root.id) and not await repo.is_admin(plain.id)
    assert (await repo.login_verified(root.id, instance.id)).mode is models.ClientMode.ADMIN
    queue = await repo.create_queue("q", creator=root.id)
    assert await repo.send(root.id, [queue.id], b"from an admin")


async def test_secrets_are_set_by_their_client_or_an_admin(repo: repository.Repository) -> None:
    root, plain = await admin_and_client(repo)
    other = await repo.register_client("other", verifier=scram.verifier("other's"))
    new = scram.verifier("new")
    with pytest.raises(errors.NotAuthorised, match="only an admin"):
        await repo.set_secret(plain.id, other.id, new)
    await repo.set_secret(plain.id, plain.id, new)
    await repo.set_secret(root.id, other.id, new)
    assert await repo.auth_verifier(other.id) == (other.id, new)
    with pytest.raises(errors.ClientNotFound):
        await repo.set_secret(root.id, 10**12, new)


async def test_disabling_ends_the_session_announces_it_and_refuses_logins(
    repo: repository.Repository, dsn: str, instance: models.Instance
) -> None:
    root, plain = await admin_and_client(repo)
    await repo.login_verified(plain.id, instance.id)
    heard: asyncio.Queue[str] = asyncio.Queue()
    listener = await asyncpg.connect(dsn)
    await listener.add_listener("courier_clients", lambda *args: heard.put_nowait(args[-1]))
    try:
        with pytest.raises(errors.NotAuthorised, match="only an admin"):
            await repo.set_client_enabled(plain.id, root.id, False)
        await repo.set_client_enabled(root.id, plain.id, False)
        assert await asyncio.wait_for(heard.get(), 5) == str(plain.id)
    finally:
        await listener.close()
    assert not (await repo.get_client(plain.id)).online
    assert await repo.auth_verifier(plain.id) is None
    with pytest.raises(errors.NotAuthorised, match=r"^login failed$"):
        await repo.login_verified(plain.id, instance.id)
    await repo.set_client_enabled(root.id, plain.id, True)
    assert (await repo.login_verified(plain.id, instance.id)).online


async def test_a_queue_is_changed_by_its_owner_or_an_admin(repo: repository.Repository) -> None:
    root, owner = await admin_and_client(repo)
    stranger = await repo.register_client("stranger")
    owned = await repo.create_queue("owned", creator=owner.id)
    orphan = await repo.create_queue("orphan")  # no creator: the admins'
    settings = models.QueueSettings(owned.id, max_deliveries=2)
    for actor, queue in ((stranger.id, owned.id), (owner.id, orphan.id)):
        with pytest.raises(errors.NotAuthorised, match=f"owner of queue {queue} or an admin"):
            await repo.delete_queue(queue, actor=actor)
    with pytest.raises(errors.NotAuthorised, match="may configure"):
        await repo.configure_queue(settings, actor=stranger.id)
    assert (await repo.configure_queue(settings, actor=owner.id)).max_deliveries == 2
    await repo.delete_queue(owned.id, actor=owner.id)
    await repo.delete_queue(orphan.id, actor=root.id)
    with pytest.raises(errors.QueueNotFound):
        await repo.delete_queue(owned.id, actor=root.id)
