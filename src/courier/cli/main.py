"""The `courier` entry point: a click group whose subcommands load on first use.

Every option is also a COURIER_* environment variable (click's auto_envvar_prefix),
and courier.toml supplies defaults per subcommand (``[serve] port = 7401``).
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import click

from courier.config import load_toml

# command name -> "module:attribute"; importing lazily keeps `courier send` fast.
COMMANDS: dict[str, str] = {
    "db": "courier.cli.db:db",
    "serve": "courier.cli.serve:serve",
    "up": "courier.cli.up:up",
    "node": "courier.cli.node_commands:node",
    "controller": "courier.cli.controller:controller",
    "replicated": "courier.cli.replicated_commands:replicated",
    "register": "courier.cli.client_commands:register",
    "secret": "courier.cli.admin_commands:secret",
    "admin": "courier.cli.admin_commands:admin",
    "queue": "courier.cli.client_commands:queue",
    "send": "courier.cli.client_commands:send",
    "peek": "courier.cli.client_commands:peek",
    "pop": "courier.cli.client_commands:pop",
    "receive": "courier.cli.client_commands:receive",
    "ack": "courier.cli.client_commands:ack",
    "nack": "courier.cli.client_commands:nack",
    "extend": "courier.cli.client_commands:extend",
    "waiting": "courier.cli.client_commands:waiting",
    "request": "courier.cli.client_commands:request",
    "reply": "courier.cli.client_commands:reply",
    "ping": "courier.cli.client_commands:ping",
    "topic": "courier.cli.topic_commands:topic",
    "subscribe": "courier.cli.topic_commands:subscribe",
    "unsubscribe": "courier.cli.topic_commands:unsubscribe",
    "publish": "courier.cli.topic_commands:publish",
    "shell": "courier.cli.shell:shell",
    "console": "courier.cli.console:console",
    "exporter": "courier.cli.exporter:exporter",
    "lab": "courier.cli.lab:lab",
    "analyze": "courier.cli.analyze:analyze",
    "bench": "courier.cli.bench:bench",
    "demo": "courier.cli.demo:demo",
}


class LazyGroup(click.Group):
    """A group that imports a subcommand's module only when it is invoked."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name in COMMANDS if self._importable(name))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, _, attribute = target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                return None  # not built yet
            raise
        command = getattr(module, attribute)
        assert isinstance(command, click.Command)
        return command

    @staticmethod
    def _importable(name: str) -> bool:
        module_name = COMMANDS[name].partition(":")[0]
        return importlib.util.find_spec(module_name) is not None


@click.group(cls=LazyGroup, context_settings={"auto_envvar_prefix": "COURIER"})
@click.option(
    "--config",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Settings file (default: ./courier.toml when present).",
)
@click.version_option(package_name="courier")
@click.pass_context
def cli(ctx: click.Context, config: Path | None) -> None:
    """Courier: durable, receiver-addressed queues on PostgreSQL, with a built-in lab."""
    ctx.default_map = load_toml(config)


def main() -> None:
    cli()
