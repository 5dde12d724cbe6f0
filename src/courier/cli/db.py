"""`courier db`: run the embedded PostgreSQL, or install the schema on any PostgreSQL.

    courier db start      initialise on first use, start, create and migrate `courier`
    courier db status     running / stopped (exit 0 only when running)
    courier db url        the DSN of the `courier` database, password included
    courier db stop       fast, clean shutdown
    courier db migrate    install or upgrade the schema (--dsn for an external server)

The cluster lives in ``<data dir>/pg`` (--data-dir, COURIER_DATA_DIR; default
~/.local/share/courier), where `courier up` finds it too. Its password is in
``<data dir>/pg.secret``; only `url` prints it, the others mask it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

from courier import config, localstate
from courier.cli.options import data_dir_option, shared_option
from courier.db import embedded, schema

# Exit codes of `status`, as init scripts use them (LSB).
EXIT_RUNNING = 0
EXIT_DEAD_WITH_PID_FILE = 1
EXIT_NOT_RUNNING = 3


def _server(data_dir: Path) -> embedded.EmbeddedPostgres:
    return localstate.embedded_database(data_dir)


@click.group()
def db() -> None:
    """Run the embedded PostgreSQL, or install the schema on any PostgreSQL."""


@db.command()
@data_dir_option
def start(data_dir: Path) -> None:
    """Start the embedded server (idempotent) and print its DSN, password masked."""
    try:
        click.echo(config.redact_dsn(_server(data_dir).start()))
    except embedded.EmbeddedError as exc:
        raise click.ClickException(str(exc)) from exc


@db.command()
@data_dir_option
def stop(data_dir: Path) -> None:
    """Stop the embedded server (a no-op when it is not running)."""
    try:
        _server(data_dir).stop()
    except embedded.EmbeddedError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo("stopped")


@db.command()
@data_dir_option
@click.pass_context
def status(ctx: click.Context, data_dir: Path) -> None:
    """Say whether the embedded server runs; exit 0 only when it does."""
    server = _server(data_dir)
    current = server.status()
    if current.state is embedded.State.RUNNING:
        click.echo(f"running (pid {current.pid}) at {config.redact_dsn(server.dsn)}")
    elif current.state is embedded.State.CRASHED:
        click.echo("stopped (it crashed: postmaster.pid is stale)")
        ctx.exit(EXIT_DEAD_WITH_PID_FILE)
    elif current.state is embedded.State.STOPPED:
        click.echo("stopped")
        ctx.exit(EXIT_NOT_RUNNING)
    else:
        click.echo(f"not initialised: no database cluster in {server.data_dir}")
        ctx.exit(EXIT_NOT_RUNNING)


@db.command()
@data_dir_option
def url(data_dir: Path) -> None:
    """Print the DSN of the embedded `courier` database, with its password."""
    try:
        click.echo(_server(data_dir).dsn)
    except embedded.EmbeddedError as exc:
        raise click.ClickException(str(exc)) from exc


@db.command()
@shared_option(
    "--dsn",
    shared_envvar="COURIER_DSN",
    default=None,
    help="PostgreSQL >= 14 to migrate (default: the running embedded server).",
)
@data_dir_option
def migrate(dsn: str | None, data_dir: Path) -> None:
    """Install or upgrade Courier's schema."""
    target = dsn or _running_embedded_dsn(data_dir)
    try:
        applied = asyncio.run(schema.migrate(target))
    except schema.FAILURES as exc:
        raise click.ClickException(f"migration failed: {exc}") from exc
    for name in applied:
        click.echo(f"applied {name}")
    click.echo("schema is up to date")


def _running_embedded_dsn(data_dir: Path) -> str:
    server = _server(data_dir)
    if server.status().state is not embedded.State.RUNNING:
        raise click.UsageError("give --dsn, or start the embedded server with `courier db start`")
    return server.dsn
