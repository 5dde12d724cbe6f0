"""Secrets on the command line: the credentials file, --secret, rotation, admins."""

from __future__ import annotations

import asyncio
import json
import stat
from pathlib import Path
from typing import Any

from cli_results import ok

from courier import credentials, models, scram
from courier.db import repository
from helpers.names import Unique

Courier = Any  # conftest.CourierCLI


def data_dir(courier: Courier) -> Path:
    return Path(courier.env["XDG_DATA_HOME"]) / "courier"


def refused(result: Any) -> None:
    assert result.returncode == 12, (result.stdout, result.stderr)
    assert result.stderr == "error: login failed\n"


def make_admin(courier: Courier, dsn: str, name: str) -> None:
    """An admin made in the database, its secret kept as `courier up` keeps it."""
    secret = scram.new_secret()

    async def register() -> None:
        repo = await repository.Repository.connect(dsn)
        try:
            await repo.register_client(
                name, models.ClientMode.ADMIN, verifier=scram.verifier(secret)
            )
        finally:
            await repo.close()

    asyncio.run(register())
    credentials.save(data_dir(courier), name, secret)


def test_register_keeps_the_secret_for_this_user_only(courier: Courier, unique: Unique) -> None:
    me = unique("keeper")
    ok(courier("register", me))
    kept = data_dir(courier) / "credentials.json"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert stat.S_IMODE(data_dir(courier).stat().st_mode) == 0o700
    secret = json.loads(kept.read_text())["clients"][me]
    assert len(secret) >= 40
    ok(courier("queue", "create", unique("mine"), "--as", me))


def test_without_the_file_a_name_alone_is_refused(
    courier: Courier, unique: Unique, tmp_path: Path
) -> None:
    me = unique("bob")
    ok(courier("register", me))
    elsewhere = {"XDG_DATA_HOME": str(tmp_path / "another-user")}  # no credentials there
    refused(courier("queue", "list", "--as", me, env=elsewhere))
    refused(courier("queue", "list", "--as", me, "--secret", "a guess", env=elsewhere))
    secret = credentials.secret_for(data_dir(courier), me)
    assert secret is not None
    ok(courier("queue", "list", "--as", me, "--secret", secret, env=elsewhere))
    ok(courier("queue", "list", "--as", me, env={**elsewhere, "COURIER_SECRET": secret}))


def test_a_chosen_secret_and_a_rotated_one(courier: Courier, unique: Unique) -> None:
    me = unique("rotor")
    ok(courier("register", me, "--secret", "chosen secret"))
    ok(courier("queue", "list", "--as", me, "--secret", "chosen secret"))
    ok(courier("secret", "rotate", "--as", me))
    refused(courier("queue", "list", "--as", me, "--secret", "chosen secret"))
    ok(courier("queue", "list", "--as", me))  # the new one, from the file


def test_an_admin_disables_enables_and_resets_a_client(
    courier: Courier, unique: Unique, module_dsn: str
) -> None:
    boss, worker = unique("boss"), unique("worker")
    make_admin(courier, module_dsn, boss)
    ok(courier("register", worker))
    before = credentials.secret_for(data_dir(courier), worker)
    not_admin = courier("admin", "disable", boss, "--as", worker)
    assert not_admin.returncode == 12 and "only an admin" in not_admin.stderr
    ok(courier("admin", "disable", worker, "--as", boss))
    refused(courier("queue", "list", "--as", worker))
    ok(courier("admin", "enable", worker, "--as", boss))
    ok(courier("queue", "list", "--as", worker))
    reset = json.loads(ok(courier("admin", "reset", worker, "--as", boss, "--json")).stdout)
    assert reset["secret"] != before
    refused(courier("queue", "list", "--as", worker, "--secret", before))
    ok(courier("queue", "list", "--as", worker, "--secret", reset["secret"]))
    deputy = unique("deputy")
    ok(courier("admin", "create", deputy, "--as", boss))
    ok(courier("admin", "disable", worker, "--as", deputy))


def test_only_the_owner_deletes_a_queue(courier: Courier, unique: Unique) -> None:
    owner, other, queue = unique("owner"), unique("other"), unique("owned")
    ok(courier("register", owner))
    ok(courier("register", other))
    ok(courier("queue", "create", queue, "--as", owner))
    denied = courier("queue", "delete", queue, "--as", other)
    assert denied.returncode == 12
    assert "only the owner of queue" in denied.stderr and "may delete it" in denied.stderr
    ok(courier("queue", "delete", queue, "--as", owner))
