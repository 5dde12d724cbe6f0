"""Secrets and admin commands: `courier secret rotate`, `courier admin create|reset|
disable|enable NAME`.

A client rotates its own secret; an admin (a client of mode admin: the one `courier
up` makes, or one another admin creates) creates admins, resets anyone's secret and
disables or enables clients. A new secret is kept in the credentials file of the data
dir (mode 0600) for the client it belongs to; a reset also prints it once, for the
admin to hand over.
"""

from __future__ import annotations

import click

from courier import credentials, models, scram
from courier.cli import common


@click.group(cls=common.Group)
def secret() -> None:
    """Change this client's own secret."""


@secret.command()
@common.client_options
def rotate() -> None:
    """Give the client of --as a new random secret (or --secret), and keep it."""
    chosen = common.options()
    if chosen.as_name is None:
        raise click.UsageError("say whose secret: courier secret rotate --as NAME")
    new = scram.new_secret()
    with common.client() as client:
        client.set_secret(new)
    kept = credentials.save(chosen.data_dir, chosen.as_name, new)
    common.emit({"client": chosen.as_name, "credentials": str(kept)},
                lambda: common.say(f"new secret of {chosen.as_name!r} kept in {kept}"))  # fmt: skip


@click.group(cls=common.Group)
def admin() -> None:
    """Administer clients (needs --as an admin client)."""


@admin.command()
@click.argument("name")
@common.client_options
def create(name: str) -> None:
    """Create an admin client called NAME; its secret is kept here."""
    new = scram.new_secret()
    with common.client() as client:
        info = client.register(name, models.ClientMode.ADMIN, secret=new)
    kept = credentials.save(common.options().data_dir, name, new)
    common.emit(info, lambda: common.say(
        f"created admin client {info.name!r} (id {info.id}); its secret is in {kept}"
    ))  # fmt: skip


@admin.command()
@click.argument("name")
@common.client_options
def reset(name: str) -> None:
    """Give client NAME a new random secret; print it (once) to hand over."""
    new = scram.new_secret()
    with common.client() as client:
        client.set_secret(new, name)
    kept = credentials.save(common.options().data_dir, name, new)
    said = f"new secret of {name!r}: {new}  (also kept in {kept})"
    common.emit({"client": name, "secret": new, "credentials": str(kept)}, lambda: common.say(said))


@admin.command()
@click.argument("name")
@common.client_options
def disable(name: str) -> None:
    """Client NAME can no longer log in; its open session ends now."""
    with common.client() as client:
        client.disable_client(name)
    common.emit({"client": name, "enabled": False}, lambda: common.say(f"disabled {name!r}"))


@admin.command()
@click.argument("name")
@common.client_options
def enable(name: str) -> None:
    """Client NAME may log in again."""
    with common.client() as client:
        client.enable_client(name)
    common.emit({"client": name, "enabled": True}, lambda: common.say(f"enabled {name!r}"))
