"""Every option of every command is also an environment variable, named by one rule.

The rule (src/courier/cli/options.py, README "Settings"): COURIER_<COMMAND PATH>_<OPTION>,
and an option shared by every command also answers to its short shared name.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from courier.cli import main, options

NOT_SETTINGS = {"help", "version"}  # they print and exit; nothing to set


def commands(
    command: click.Command, path: tuple[str, ...], context: click.Context
) -> Iterator[tuple[tuple[str, ...], click.Command, click.Context]]:
    """``command`` and every command under it, each with its path and a context like
    the one click makes when it runs (which names the environment variables)."""
    yield path, command, context
    if isinstance(command, click.Group):
        for name in command.list_commands(context):
            child = command.get_command(context, name)
            assert child is not None, name
            child_context = click.Context(child, info_name=name, parent=context)
            yield from commands(child, (*path, name), child_context)


def rule_name(path: tuple[str, ...], option: click.Option) -> str:
    """COURIER_<COMMAND PATH>_<OPTION>, OPTION being the long flag without its dashes."""
    flag = next(name for name in option.opts if name.startswith("--"))
    return "_".join(["COURIER", *path, flag[2:]]).upper().replace("-", "_")


def all_options() -> list[tuple[str, click.Option, click.Context]]:
    root = click.Context(main.cli, info_name="courier", auto_envvar_prefix="COURIER")
    found = []
    for path, command, context in commands(main.cli, (), root):
        for param in command.params:
            if isinstance(param, click.Option) and param.name not in NOT_SETTINGS:
                found.append((rule_name(path, param), param, context))
    return found


OPTIONS = all_options()


def test_the_walk_finds_every_command_and_its_options() -> None:
    names = {rule for rule, _, _ in OPTIONS}
    # A few known ones, from several levels of the tree: the walk is not vacuous.
    assert {
        "COURIER_CONFIG", "COURIER_SERVE_MAX_CLIENTS", "COURIER_DB_START_DATA_DIR",
        "COURIER_LAB_RUN_SERVERS", "COURIER_SEND_AS", "COURIER_UP_DATA_DIR",
    } <= names  # fmt: skip
    assert len(OPTIONS) > 150


@pytest.mark.parametrize(("rule", "option", "context"), OPTIONS, ids=[r for r, _, _ in OPTIONS])
def test_every_option_answers_to_its_rule_name(
    rule: str, option: click.Option, context: click.Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(rule, "from-the-environment")
    assert option.resolve_envvar_value(context) == "from-the-environment"


SHARED = [(rule, option, context) for rule, option, context in OPTIONS
          if isinstance(option, options.SharedOption)]  # fmt: skip


@pytest.mark.parametrize(("rule", "option", "context"), SHARED, ids=[r for r, _, _ in SHARED])
def test_a_shared_option_also_answers_to_its_shared_name_and_its_own_wins(
    rule: str, option: options.SharedOption, context: click.Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(rule, raising=False)
    monkeypatch.setenv(option.shared_envvar, "shared")
    assert option.resolve_envvar_value(context) == "shared"
    monkeypatch.setenv(rule, "own")
    assert option.resolve_envvar_value(context) == "own"


def test_the_shared_names_are_the_documented_ones() -> None:
    shared = {option.shared_envvar for _, option, _ in SHARED}
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    assert shared == {
        "COURIER_AS", "COURIER_SECRET", "COURIER_SERVERS", "COURIER_DATA_DIR", "COURIER_DSN",
        "COURIER_ADMIN_TOKEN", "COURIER_ADMIN_TOKEN_FILE", "COURIER_VIEWER_TOKEN",
        "COURIER_VIEWER_TOKEN_FILE", "COURIER_BENCH_RABBITMQ", "COURIER_TLS", "COURIER_CA",
    }  # fmt: skip
    for name in shared:
        assert f"`{name}`" in readme, f"README does not document {name}"
