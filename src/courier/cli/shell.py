"""`courier shell --as NAME`: an interactive shell for one logged-in client.

Every line runs one of the one-shot client commands (`send jobs hello`, `pop`,
`queue list`, ...) on the shell's own connection, so the commands, their options
and their output are exactly those of `courier send` and friends; errors are printed
and the shell carries on. `reply BODY` answers the last message read. History lives
in the data directory; Tab completes commands and queue names.
"""

from __future__ import annotations

import cmd
import contextlib
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import click

from courier import errors, localstate
from courier.cli import client_commands, common
from courier.client import sync_client

HISTORY_LENGTH = 1000

COMMANDS: dict[str, click.Command] = {
    "send": client_commands.send,
    "peek": client_commands.peek,
    "pop": client_commands.pop,
    "receive": client_commands.receive,
    "ack": client_commands.ack,
    "nack": client_commands.nack,
    "extend": client_commands.extend,
    "request": client_commands.request,
    "reply": client_commands.reply,
    "waiting": client_commands.waiting,
    "queue": client_commands.queue,
    "register": client_commands.register,
    "ping": client_commands.ping,
}

BUILTINS = ("help", "whoami", "quit", "exit")


class CourierShell(cmd.Cmd):
    """Reads lines and runs them as client commands on one shared client."""

    def __init__(self, state: common.Shell, *, interactive: bool) -> None:
        super().__init__()
        self.state = state
        name = state.client.name
        self.prompt = f"courier:{name}> " if interactive else ""
        self.intro = (
            f"Logged in as {name!r} (client {state.client.client_id}) on {state.client.server}."
            " Type help for the commands, quit to leave."
            if interactive
            else None
        )

    def default(self, line: str) -> None:
        try:
            words = shlex.split(line)
        except ValueError as exc:
            click.echo(f"error: {exc}", err=True)
            return
        command = COMMANDS.get(words[0])
        if command is None:
            click.echo(f"error: unknown command {words[0]!r}; type help", err=True)
            return
        run(command, words[0], words[1:], self.state)

    def emptyline(self) -> bool:
        return False  # an empty line does nothing (cmd would repeat the last command)

    def do_help(self, arg: str) -> None:
        """help [COMMAND]: list the commands, or show one command's options."""
        if arg in COMMANDS:
            run(COMMANDS[arg], arg, ["--help"], self.state)
            return
        width = max(map(len, COMMANDS))
        for name, command in COMMANDS.items():
            click.echo(f"  {name:<{width}}  {command.get_short_help_str(70)}")
        click.echo(f"  {'whoami':<{width}}  Show who this shell is logged in as.")
        click.echo(f"  {'quit':<{width}}  Leave the shell (also exit, Ctrl-D).")
        click.echo("help COMMAND shows a command's options.")

    def do_whoami(self, arg: str) -> None:
        """Show who this shell is logged in as."""
        client = self.state.client
        click.echo(f"{client.name} (client {client.client_id}) on {client.server}")

    def do_quit(self, arg: str) -> bool:
        """Leave the shell."""
        return True

    do_exit = do_quit

    def do_EOF(self, arg: str) -> bool:  # noqa: N802 (cmd's name for end of input)
        if self.prompt:
            click.echo()
        return True

    def completenames(self, text: str, *ignored: object) -> list[str]:
        return [name + " " for name in (*COMMANDS, *BUILTINS) if name.startswith(text)]

    def completedefault(self, text: str, line: str, begidx: int, endidx: int) -> list[str]:
        """Subcommands after `queue`, options after -, queue names elsewhere."""
        words = line[:begidx].split()
        command = COMMANDS.get(words[0]) if words else None
        if isinstance(command, click.Group):
            if len(words) == 1:
                return [name + " " for name in command.commands if name.startswith(text)]
            command = command.commands.get(words[1])
        if text.startswith("-") and command is not None:
            options = (opt for param in command.params for opt in param.opts)
            return [option + " " for option in options if option.startswith(text)]
        return [name + " " for name in self.queue_names() if name.startswith(text)]

    def complete_help(self, text: str, *ignored: object) -> list[str]:
        return [name for name in COMMANDS if name.startswith(text)]

    def queue_names(self) -> list[str]:
        try:
            return [queue.name for queue in self.state.client.list_queues()]
        except errors.CourierError:
            return []


def run(command: click.Command, name: str, args: list[str], state: common.Shell) -> None:
    """Run one command line; report its failure and return, whatever happens."""
    try:
        command.main(args, prog_name=name, standalone_mode=False, obj=state)
    except click.exceptions.Exit:
        pass  # the command printed what went wrong, if anything did
    except click.ClickException as exc:
        exc.show()
    except click.exceptions.Abort:
        click.echo("interrupted", err=True)


@contextlib.contextmanager
def history(path: Path) -> Iterator[None]:
    """Load and save readline history, when readline is there to use it."""
    try:
        import readline
    except ImportError:
        yield None
        return
    readline.set_history_length(HISTORY_LENGTH)
    readline.set_completer_delims(" \t\n")  # queue names may hold - and .
    with contextlib.suppress(OSError):
        readline.read_history_file(path)
    try:
        yield None
    finally:
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            readline.write_history_file(path)


@click.command(cls=common.Command)
@common.client_options
def shell() -> None:
    """An interactive shell for one client (--as NAME is required)."""
    chosen = common.options()
    if chosen.as_name is None:
        raise click.UsageError("say who you are: courier shell --as NAME")
    servers, tls = chosen.connection()
    secret = common.secret_of(chosen, chosen.as_name)
    with sync_client.Client.connect(servers, name=chosen.as_name, secret=secret, **tls) as client:
        interactive = sys.stdin.isatty()
        console = CourierShell(common.Shell(client), interactive=interactive)
        history_path = chosen.data_dir / localstate.SHELL_HISTORY_FILE
        with history(history_path) if interactive else contextlib.nullcontext():
            console.cmdloop()
