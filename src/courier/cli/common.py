"""What every client command shares: connection options, output, errors and exit codes.

Options on every client command (each also an environment variable):

    --as NAME          log in as this client            COURIER_AS
    --secret SECRET    its secret (default: the one     COURIER_SECRET
                       `courier register` kept in <data dir>/credentials.json)
    --servers H:P,...  middleware addresses             COURIER_SERVERS
                       (default: the servers of the running `courier up`, from its
                       state file, else 127.0.0.1:7400)
    --data-dir DIR     where `courier up` keeps that    COURIER_DATA_DIR
                       state file
    --tls              speak TLS (system trust store)   COURIER_TLS
    --ca FILE          trust this PEM CA bundle         COURIER_CA
                       (implies --tls; default: the CA of `courier up --tls`
                       when the servers are its own)
    --json             machine-readable output on stdout

Exit codes (stable; a subclass not listed exits like its parent):

     0  success
     1  any other Courier error (InternalError, ...)
     2  bad command line (click's usage errors)
     3  QueueNotFound        4  QueueExists         5  QueueNotEmpty
     6  NoMessage / QueueEmpty: nothing to read (peek, pop, receive)
     7  ClientNotFound       8  ClientExists        9  ClientOnline
    10  ServerFull          11  BadRequest (InvalidPriority, PayloadTooLarge, BadSelector)
    12  NotAuthorised (NotLoggedIn)                 13  Unavailable
    14  ConnectionLost (also: no server reachable)  15  RequestTimeout
    16  ProtocolError       17  QuotaExceeded      18  LeaseExpired
    19  TopicNotFound       20  TopicExists
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from courier import config, credentials, errors, localstate, models
from courier.cli.options import data_dir_flag, shared_option
from courier.client import sync_client

EXIT_CODES: dict[type[errors.CourierError], int] = {
    errors.CourierError: 1,
    errors.QueueNotFound: 3,
    errors.QueueExists: 4,
    errors.QueueNotEmpty: 5,
    errors.NoMessage: 6,
    errors.ClientNotFound: 7,
    errors.ClientExists: 8,
    errors.ClientOnline: 9,
    errors.ServerFull: 10,
    errors.BadRequest: 11,
    errors.NotAuthorised: 12,
    errors.Unavailable: 13,
    errors.ConnectionLost: 14,
    errors.RequestTimeout: 15,
    errors.ProtocolError: 16,
    errors.QuotaExceeded: 17,
    errors.LeaseExpired: 18,
    errors.TopicNotFound: 19,
    errors.TopicExists: 20,
}

F = TypeVar("F", bound=Callable[..., Any])


def exit_code(exc: errors.CourierError) -> int:
    """The exit code of the nearest class in ``exc``'s ancestry that has one."""
    for cls in type(exc).__mro__:
        if cls in EXIT_CODES:
            return EXIT_CODES[cls]
    return 1


def fail(exc: errors.CourierError) -> NoReturn:
    """Print ``error: ...`` on stderr and leave with the error's exit code."""
    message = exc.message
    if isinstance(exc, errors.NotLoggedIn):
        message = "log in first: pass --as NAME (or set COURIER_AS)"
    click.echo(f"error: {message}", err=True)
    raise click.exceptions.Exit(exit_code(exc))


class Command(click.Command):
    """A click command whose Courier errors become a message and an exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except errors.CourierError as exc:
            fail(exc)


class Group(click.Group):
    command_class = Command


# -- options ---------------------------------------------------------------------------


@dataclass(slots=True)
class Options:
    """The connection and output options of one command invocation."""

    as_name: str | None = None
    as_name_given: bool = False
    secret: str | None = None
    servers: tuple[tuple[str, int], ...] | None = None
    data_dir: Path = dataclasses.field(default_factory=localstate.data_dir)
    json: bool = False
    tls: bool = False
    ca: Path | None = None

    def connection(self) -> tuple[tuple[tuple[str, int], ...], dict[str, Any]]:
        """The servers to use and the client's TLS options: those given, else those of
        the system `courier up` runs (its CA included)."""
        if self.servers is not None:
            return self.servers, {"tls": self.tls, "ca": self.ca}
        ca = self.ca or localstate.local_ca(self.data_dir)
        return localstate.local_servers(self.data_dir), {"tls": self.tls, "ca": ca}


@dataclass(slots=True)
class Shell:
    """What the interactive shell lends the commands it runs."""

    client: sync_client.Client
    last_message: models.Message | None = None


_OPTIONS_KEY = "courier.options"


def options() -> Options:
    """This invocation's --as, --servers and --json (stored by the options' callbacks)."""
    found = click.get_current_context().meta.get(_OPTIONS_KEY)
    return found if isinstance(found, Options) else Options()


def _store(field: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        stored = ctx.meta.setdefault(_OPTIONS_KEY, Options())
        if field == "data_dir":
            value = localstate.data_dir(value)
        if field == "servers" and value is not None:
            try:
                value = config.parse_servers(value)
            except ValueError as exc:
                raise click.BadParameter(f"{value!r}: expected host:port,...") from exc
        if field == "as_name" and value is not None:
            source = ctx.get_parameter_source(param.name or "")
            stored.as_name_given = source is click.core.ParameterSource.COMMANDLINE
        setattr(stored, field, value)

    return callback


def client_options(command: F) -> F:
    """Add --as, --servers, --data-dir, --json, --tls and --ca to a command (read them
    back with ``options()``)."""
    decorators = [
        shared_option(
            "--as", "as", shared_envvar="COURIER_AS", metavar="NAME", expose_value=False,
            callback=_store("as_name"), help="Log in as this client.",
        ),
        shared_option(
            "--secret", shared_envvar="COURIER_SECRET", metavar="SECRET", expose_value=False,
            callback=_store("secret"),
            help="The client's secret (default: the one kept in <data dir>/credentials.json).",
        ),
        shared_option(
            "--servers", shared_envvar="COURIER_SERVERS", metavar="HOST:PORT,...",
            expose_value=False, callback=_store("servers"),
            help="Middleware servers (default: those of `courier up`, else 127.0.0.1:7400).",
        ),
        data_dir_flag(
            expose_value=False, callback=_store("data_dir"),
            help="Where to look for the servers of `courier up` (default: ~/.local/share/courier).",
        ),
        click.option(
            "--json", "json", is_flag=True, expose_value=False, callback=_store("json"),
            help="Machine-readable output.",
        ),
        shared_option(
            "--tls", is_flag=True, shared_envvar="COURIER_TLS", expose_value=False,
            callback=_store("tls"), help="Speak TLS, trusting the system's CAs (or --ca).",
        ),
        shared_option(
            "--ca", shared_envvar="COURIER_CA", metavar="FILE", expose_value=False,
            type=click.Path(dir_okay=False, exists=True, path_type=Path),
            callback=_store("ca"),
            help="Trust this PEM CA bundle (implies --tls; default: that of `courier up --tls`).",
        ),
    ]  # fmt: skip
    for decorate in reversed(decorators):
        command = decorate(command)
    return command


# -- the client ------------------------------------------------------------------------


@contextlib.contextmanager
def client(*, login: bool = True) -> Iterator[sync_client.Client]:
    """The client a command works with: the shell's, or a fresh one closed at the end."""
    chosen = options()
    shell = shell_state()
    if shell is not None:
        if chosen.as_name_given and chosen.as_name != shell.client.name:
            raise click.UsageError(f"this shell is logged in as {shell.client.name!r}")
        yield shell.client
        return
    servers, tls = chosen.connection()
    name = chosen.as_name if login else None
    secret = secret_of(chosen, name)
    with sync_client.Client.connect(servers, name=name, secret=secret, **tls) as connected:
        yield connected


def secret_of(chosen: Options, name: str | None) -> str | None:
    """The secret to log in as ``name`` with: --secret, else the credentials file's."""
    if name is None:
        return None
    return chosen.secret or credentials.secret_for(chosen.data_dir, name)


def shell_state() -> Shell | None:
    return click.get_current_context().find_object(Shell)


# -- output ----------------------------------------------------------------------------


def emit(data: Any, human: Callable[[], None]) -> None:
    """Print ``data`` as JSON with --json, else call ``human`` to print for people."""
    if options().json:
        click.echo(json.dumps(data, default=_jsonable))
    else:
        human()


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def say(text: str) -> None:
    click.echo(text)


def note(text: str) -> None:
    """A remark for people, on stderr so that stdout stays clean for pipes."""
    click.echo(text, err=True)


def table(title: str | None, columns: list[str], rows: list[list[Any]]) -> None:
    from rich.console import Console  # rich costs an import only where a table is drawn
    from rich.table import Table

    drawn = Table(title=title, title_justify="left")
    for index, column in enumerate(columns):
        numeric = rows and all(isinstance(row[index], int) for row in rows)
        drawn.add_column(column, justify="right" if numeric else "left")
    for row in rows:
        drawn.add_row(*("" if cell is None else str(cell) for cell in row))
    Console(file=sys.stdout, soft_wrap=True).print(drawn)
