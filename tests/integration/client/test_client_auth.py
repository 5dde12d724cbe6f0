"""Secrets through both clients (async and sync): wrong or missing secrets, rotation,
disabling. The shared servers require secrets."""

from __future__ import annotations

import pytest
from client_harness import Connect

from courier import errors, models, scram
from courier.db import repository
from helpers.names import Unique
from helpers.servers import ServerProcess, address


async def make_admin(dsn: str, name: str, secret: str) -> None:
    repo = await repository.Repository.connect(dsn)
    try:
        await repo.register_client(name, models.ClientMode.ADMIN, verifier=scram.verifier(secret))
    finally:
        await repo.close()


async def test_a_wrong_or_missing_secret_is_one_generic_refusal(
    connect: Connect, servers: list[ServerProcess], unique: Unique, without_default_secrets: None
) -> None:
    name = unique("guarded")
    anonymous = await connect(address(servers[0]))
    info = await anonymous.register(name, secret="the right one")
    attempts = [{"name": name, "secret": "a wrong one"}, {"name": name}, {"client_id": info.id}]
    for attempt in attempts:  # a wrong secret, and none (by name, by id)
        with pytest.raises(errors.NotAuthorised) as caught:
            await connect(address(servers[0]), **attempt)
        assert caught.value.message == "login failed"
    client = await connect(address(servers[0]), client_id=info.id, secret="the right one")
    assert client.name == name


async def test_rotating_and_disabling(
    connect: Connect, servers: list[ServerProcess], unique: Unique, module_dsn: str
) -> None:
    boss, name = unique("boss"), unique("rotating")
    await make_admin(module_dsn, boss, "boss secret")
    anonymous = await connect(address(servers[0]))
    await anonymous.register(name, secret="first")
    client = await connect(address(servers[0]), name=name, secret="first")
    await client.set_secret("second")
    await client.close()
    with pytest.raises(errors.NotAuthorised, match="login failed"):
        await connect(address(servers[1]), name=name, secret="first")
    admin = await connect(address(servers[1]), name=boss, secret="boss secret")
    await admin.disable_client(name)
    with pytest.raises(errors.NotAuthorised, match="login failed"):
        await connect(address(servers[0]), name=name, secret="second")
    await admin.enable_client(name)
    again = await connect(address(servers[0]), name=name, secret="second")
    assert again.name == name
