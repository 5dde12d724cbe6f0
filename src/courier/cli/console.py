"""`courier console`: serve the web console until Ctrl-C.

    courier console [--host 127.0.0.1] [--port 8080] [--dsn DSN] [--admin-token-file PATH]
                    [--viewer-token-file PATH] [--allowed-host NAME]...

Without --dsn the console reads the database that `courier up` started (its state
file in the data dir), else the local embedded database if it runs. Without
--admin-token-file or --admin-token (or COURIER_ADMIN_TOKEN_FILE, COURIER_ADMIN_TOKEN)
it uses the token `courier up` recorded, else it generates one and prints it once.
A token on the command line shows in `ps`; a file or the environment does not.

Without a viewer token the console reads out every message to whoever reaches it,
so it listens on loopback only and answers only to loopback Host names (plus
--allowed-host); with --viewer-token-file (or COURIER_VIEWER_TOKEN) reading needs
that token and any --host is allowed.
"""

from __future__ import annotations

import logging
from pathlib import Path

import click

from courier import config, localstate
from courier.cli.options import data_dir_option, shared_option
from courier.console import auth, hosts, settings


def resolve_token(given: str | None, data_dir: Path) -> tuple[str, str | None]:
    """The admin token, and a note to print about it (None when given by the user)."""
    if given:
        return given, None
    recorded = localstate.read_up_state(data_dir)
    if recorded is not None and recorded.admin_token:
        return recorded.admin_token, "admin actions take the token `courier up` printed"
    token = auth.generate_token()
    return token, f"admin token (generated; shown once): {token}"


def read_token_file(path: Path, what: str) -> str:
    """The first line of the file, without surrounding blanks; it must not be empty."""
    lines = path.read_text().splitlines()
    token = lines[0].strip() if lines else ""
    if not token:
        raise click.UsageError(f"{path}: the {what} token file is empty")
    return token


def token_from(given: str | None, path: Path | None, what: str) -> str | None:
    """The token given directly or in a file (not both)."""
    if path is None:
        return given
    if given:
        raise click.UsageError(f"give --{what}-token or --{what}-token-file, not both")
    return read_token_file(path, what)


def show_admin_actions() -> None:
    """Admin actions (who did what) go to stderr, whatever uvicorn's log level."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    audit = logging.getLogger("courier.console.audit")
    audit.addHandler(handler)
    audit.setLevel(logging.INFO)


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
@shared_option(
    "--viewer-token",
    shared_envvar="COURIER_VIEWER_TOKEN",
    default=None,
    help="Token for reading pages and the JSON API (default: none; then the console"
    " serves loopback only).",
)
@shared_option(
    "--viewer-token-file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    shared_envvar="COURIER_VIEWER_TOKEN_FILE",
    default=None,
    help="Read the viewer token from this file (its first line): unlike --viewer-token,"
    " it never shows in `ps`.",
)
@click.option(
    "--allowed-host",
    multiple=True,
    help="Another Host name (or name:port) the console answers to, e.g. behind a proxy;"
    " repeatable or comma-separated.",
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
    viewer_token: str | None,
    viewer_token_file: Path | None,
    allowed_host: tuple[str, ...],
    data_dir: Path,
    refresh_ms: int,
    log_level: str,
) -> None:
    """Serve the management console: live overview, clients, queues, messages."""
    from courier.console import serving  # the web stack loads only for this command

    chosen_dsn = dsn or localstate.local_dsn(data_dir)
    if not chosen_dsn:
        raise click.UsageError("no database: pass --dsn, or start one with `courier up`")
    token, note = resolve_token(token_from(admin_token, admin_token_file, "admin"), data_dir)
    try:
        console_settings = settings.ConsoleSettings(
            dsn=chosen_dsn, admin_token=token, host=host, port=port, refresh_ms=refresh_ms,
            viewer_token=token_from(viewer_token, viewer_token_file, "viewer") or None,
            allowed_hosts=hosts.split_allowed(allowed_host),
        )  # fmt: skip
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if note:
        click.echo(note)
    show_admin_actions()
    click.echo(f"Courier console on http://{host}:{port}/  (Ctrl-C stops it)")
    serving.serve_forever(console_settings, log_level.lower())
