"""Options several commands share, and the one rule for their environment variables.

Every option of every command is also the environment variable
``COURIER_<COMMAND PATH>_<OPTION>`` (``courier serve --max-clients`` is
COURIER_SERVE_MAX_CLIENTS, ``courier lab run --servers`` is COURIER_LAB_RUN_SERVERS):
click's ``auto_envvar_prefix``. An option every command means the same way also
answers to a short name shared by all of them (COURIER_DSN, COURIER_DATA_DIR,
COURIER_SERVERS, ...); the command's own name wins when both are set.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from courier import localstate

F = TypeVar("F", bound=Callable[..., Any])


class SharedOption(click.Option):
    """An option that also answers to a name every command shares."""

    def __init__(self, *args: Any, shared_envvar: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.shared_envvar = shared_envvar

    def resolve_envvar_value(self, ctx: click.Context) -> str | None:
        own = super().resolve_envvar_value(ctx)
        if own is not None:
            return own
        return os.environ.get(self.shared_envvar) or None


def shared_option(*decls: str, shared_envvar: str, **attrs: Any) -> Callable[[F], F]:
    return click.option(*decls, cls=SharedOption, shared_envvar=shared_envvar, **attrs)


def data_dir_flag(**attrs: Any) -> Callable[[F], F]:
    """--data-dir (COURIER_DATA_DIR): where this machine's Courier lives, resolved to
    a path; ``attrs`` override click.option's settings."""
    settings: dict[str, Any] = {
        "type": click.Path(file_okay=False, path_type=Path),
        "default": None,
        "callback": lambda ctx, param, value: localstate.data_dir(value),
        "help": "Courier's local data dir: the embedded database, `courier up`'s state and"
        " logs (default: ~/.local/share/courier).",
    }
    return shared_option("--data-dir", shared_envvar="COURIER_DATA_DIR", **(settings | attrs))


data_dir_option = data_dir_flag()
