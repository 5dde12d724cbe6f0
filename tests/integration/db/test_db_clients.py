"""Clients: registration, lookup, sessions held by middleware instances."""

from __future__ import annotations

import pytest

from courier import errors, models
from courier.db import repository


async def test_register_returns_the_stored_client(repo: repository.Repository) -> None:
    registered = await repo.register_client("alice", models.ClientMode.READ_ONLY)

    assert registered.name == "alice"
    assert registered.mode is models.ClientMode.READ_ONLY
    assert registered.online is False
    assert await repo.get_client(registered.id) == registered


async def test_mode_defaults_to_read_write(repo: repository.Repository) -> None:
    assert (await repo.register_client("alice")).mode is models.ClientMode.READ_WRITE


async def test_duplicate_name_is_refused(repo: repository.Repository) -> None:
    first = await repo.register_client("alice")

    with pytest.raises(errors.ClientExists):
        await repo.register_client("alice", models.ClientMode.READ_ONLY)
    assert await repo.get_client("alice") == first


@pytest.mark.parametrize("name", ["", "x" * 256])
async def test_bad_names_are_refused(repo: repository.Repository, name: str) -> None:
    with pytest.raises(errors.BadRequest):
        await repo.register_client(name)


async def test_lookup_by_id_and_by_name(repo: repository.Repository) -> None:
    alice = await repo.register_client("alice")
    bob = await repo.register_client("bob")

    assert await repo.get_client("bob") == bob
    assert await repo.get_client(alice.id) == alice
    assert alice.id != bob.id


@pytest.mark.parametrize("key", [999, "nobody"])
async def test_unknown_client_is_not_found(repo: repository.Repository, key: int | str) -> None:
    with pytest.raises(errors.ClientNotFound):
        await repo.get_client(key)


async def test_login_opens_a_session(repo: repository.Repository) -> None:
    alice = await repo.register_client("alice")
    instance = await repo.register_instance("127.0.0.1:7400")

    logged_in = await repo.login("alice", instance.id)

    assert logged_in == models.ClientInfo(alice.id, "alice", alice.mode, online=True)
    assert (await repo.get_client(alice.id)).online is True


@pytest.mark.parametrize("key", [999, "nobody"])
async def test_login_of_unknown_client_is_not_found(
    repo: repository.Repository, key: int | str
) -> None:
    instance = await repo.register_instance("127.0.0.1:7400")
    with pytest.raises(errors.ClientNotFound):
        await repo.login(key, instance.id)


async def test_second_live_session_is_refused_on_any_instance(
    repo: repository.Repository,
) -> None:
    alice = await repo.register_client("alice")
    first = await repo.register_instance("127.0.0.1:7400")
    second = await repo.register_instance("127.0.0.1:7401")
    await repo.login(alice.id, first.id)

    with pytest.raises(errors.ClientOnline):
        await repo.login(alice.id, second.id)
    with pytest.raises(errors.ClientOnline):
        await repo.login("alice", first.id)


async def test_logout_by_the_holding_instance_ends_the_session(
    repo: repository.Repository,
) -> None:
    alice = await repo.register_client("alice")
    first = await repo.register_instance("127.0.0.1:7400")
    second = await repo.register_instance("127.0.0.1:7401")
    await repo.login(alice.id, first.id)

    await repo.logout(alice.id, second.id)  # not the holder: nothing happens
    assert (await repo.get_client(alice.id)).online is True

    await repo.logout(alice.id, first.id)
    assert (await repo.get_client(alice.id)).online is False
    assert (await repo.login(alice.id, second.id)).online is True


async def test_login_through_an_unregistered_instance_fails(
    repo: repository.Repository,
) -> None:
    await repo.register_client("alice")
    with pytest.raises(errors.InternalError, match="not registered"):
        await repo.login("alice", 999)
    assert (await repo.get_client("alice")).online is False
