"""The launcher: a middleware gets its DSN through the environment, never its argv, and
is ready only when it answers itself."""

from __future__ import annotations

import urllib.parse
from pathlib import Path

import psutil
import pytest

import courier
from courier.server import launcher

UNREACHABLE_DSN = "postgresql://nobody:wrong@127.0.0.1:1/nothing"


@pytest.mark.parametrize("inherit_settings", [False, True])
def test_the_dsn_goes_to_the_child_by_environment(
    dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inherit_settings: bool
) -> None:
    # Settings of the parent's own: the child takes them only when it inherits, and
    # even then the DSN it is given beats an inherited one.
    monkeypatch.setenv("COURIER_SERVE_MAX_CLIENTS", "3")
    monkeypatch.setenv("COURIER_DSN", UNREACHABLE_DSN)
    server = launcher.Middleware.start(tmp_path, inherit_settings=inherit_settings, dsn=dsn)
    try:
        server.wait_ready()
        child = psutil.Process(server.pid)
        command_line = " ".join(child.cmdline())
        assert "--dsn" not in command_line and dsn not in command_line
        password = urllib.parse.urlsplit(dsn).password
        assert password is None or password not in command_line
        environment = child.environ()
        assert environment[launcher.DSN_VARIABLE] == dsn
        assert ("COURIER_SERVE_MAX_CLIENTS" in environment) is inherit_settings
        with courier.Client.connect(server.address) as client:
            client.register(f"launched-{inherit_settings}")  # the database answers
    finally:
        server.stop()


def test_a_server_already_on_the_port_does_not_pass_for_the_new_one(
    dsn: str, tmp_path: Path
) -> None:
    first = launcher.Middleware.start(tmp_path / "first", dsn=dsn)
    try:
        first.wait_ready()
        second = launcher.Middleware.start(tmp_path / "second", port=first.port, dsn=dsn)
        try:
            with pytest.raises(launcher.LaunchFailed, match="exited"):
                second.wait_ready(timeout=20)
        finally:
            second.stop()
    finally:
        first.stop()
