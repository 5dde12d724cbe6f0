"""``launcher.free_port``: the ports it hands out lie below the kernel's ephemeral
range, where no outgoing connection can take them before a middleware binds them."""

from __future__ import annotations

import itertools
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from courier.server import launcher


@pytest.fixture
def ephemeral_range(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """Make the kernel's ephemeral port range read as the given file text."""

    def set_range(text: str) -> None:
        ephemeral = tmp_path / "ip_local_port_range"
        ephemeral.write_text(text)
        monkeypatch.setattr(launcher, "EPHEMERAL_RANGE", ephemeral)

    return set_range


def test_ports_lie_below_the_ephemeral_range_and_are_never_handed_out_twice(
    ephemeral_range: Callable[[str], None],
) -> None:
    ephemeral_range("40000\t60999\n")
    ports = [launcher.free_port() for _ in range(200)]
    assert all(launcher.LOWEST_PORT <= port < 40_000 for port in ports)
    assert len(set(ports)) == len(ports)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", ports[-1]))  # it was free when handed out


def test_a_port_something_listens_on_is_not_handed_out(
    ephemeral_range: Callable[[str], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    ephemeral_range("40000 60999\n")
    monkeypatch.setattr(launcher, "_handed_out", set())
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        taken = listener.getsockname()[1]
        # The random draw is made to hit the taken port twice before any other.
        picks = itertools.chain([taken, taken], itertools.count(30_000))
        monkeypatch.setattr(launcher.random, "randrange", lambda *_: next(picks))
        port = launcher.free_port()
    assert port != taken and port >= 30_000


def test_without_a_known_range_the_kernel_picks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(launcher, "EPHEMERAL_RANGE", tmp_path / "missing")
    port = launcher.free_port()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", port))
