"""`courier console`: serve the web console until Ctrl-C.

    courier console [--host 127.0.0.1] [--port 8080] [--dsn DSN] [--admin-token-file PATH]

Without --dsn the console reads the database that `courier up` started (its state
file in the data dir), else the local embedded database if it runs. Without
--admin-token-file or --admin-token (or COURIER_ADMIN_TOKEN_FILE, COURIER_ADMIN_TOKEN)
it uses the token `courier up` recorded, else it generates one and prints it once.
A token on the command line shows in `ps`; a file or the environment does not.
"""

from __future__ import annotations

from pathlib import Path

import click

from courier import config, localstate
from courier.cli.options import data_dir_option, shared_option
from courier.console import auth, settings


def resolve_token(given: str | None, data_dir: Path) -> tuple[str, str | None]:
    """The admin token, and a note to print about it (None when given by the user)."""
    if given:
        return given, None
    recorded = localstate.read_up_state(data_dir)
    if recorded is not None and recorded.admin_token:
        return recorded.admin_token, "admin actions take the token `courier up` printed"
    token = auth.generate_token()
    return token, f"admin token (generated; shown once): {token}"


def read_token_file(path: Path) -> str:
    """The first line of the file, without surrounding blanks; it must not be empty."""
    lines = path.read_text().splitlines()
    token = lines[0].strip() if lines else ""
    if not token:
        raise click.UsageError(f"{path}: the admin token file is empty")
    return token


@click.command()
@shared_option(
    "--dsn", shared_envvar="COURIER_DSN", default=None,
    help="PostgreSQL DSN (default: the local database).",
)  # fmt: skip
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=config.DEFAULT_CONSOLE_PORT, show_default=True, help="HTTP port.")
@shared_option(
    "--admin-token",
    shared_envvar="COURIER_ADMIN_TOKEN",
    default=None,
    help="Token for the admin actions (default: `courier up`'s, else a new one, printed once).",
)
@shared_option(
    "--admin-token-file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    shared_envvar="COURIER_ADMIN_TOKEN_FILE",
    default=None,
    help="Read the admin token from this file (its first line): unlike --admin-token,"
    " it never shows in `ps`.",
)
@data_dir_option
@click.option("--refresh-ms", default=2000, show_default=True, help="How often pages refresh.")
@click.option("--log-level", default="warning", show_default=True, help="uvicorn's log level.")
def console(
    dsn: str | None,
    host: str,
    port: int,
    admin_token: str | None,
    admin_token_file: Path | None,
    data_dir: Path,
    refresh_ms: int,
    log_level: str,
) -> None:
    """Serve the management console: live overview, clients, queues, messages."""
    from courier.console import serving  # the web stack loads only for this command

    chosen_dsn = dsn or localstate.local_dsn(data_dir)
    if not chosen_dsn:
        raise click.UsageError("no database: pass --dsn, or start one with `courier up`")
    if admin_token_file is not None:
        if admin_token:
            raise click.UsageError("give --admin-token or --admin-token-file, not both")
        admin_token = read_token_file(admin_token_file)
    token, note = resolve_token(admin_token, data_dir)
    if note:
        click.echo(note)
    console_settings = settings.ConsoleSettings(
        dsn=chosen_dsn, admin_token=token, host=host, port=port, refresh_ms=refresh_ms
    )
    click.echo(f"Courier console on http://{host}:{port}/  (Ctrl-C stops it)")
    serving.serve_forever(console_settings, log_level.lower())
