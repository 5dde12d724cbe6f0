"""The Host allow-list on its own (the process tests in test_console_rebinding.py
check it in front of a real console)."""

from __future__ import annotations

import pytest

from courier.console import hosts

ALLOWED = hosts.allow_list(8080, ("proxy.lan", "console.lan:8443,Other.LAN"))


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1:8080", "localhost:8080", "LocalHost:8080", "[::1]:8080", "proxy.lan",
     "proxy.lan:443", "console.lan:8443", "other.lan:1"],
)  # fmt: skip
def test_listed_hosts_pass(host: str) -> None:
    assert hosts.allows(ALLOWED, host)


@pytest.mark.parametrize(
    "host",
    [None, "", "evil.example", "evil.example:8080", "127.0.0.1", "127.0.0.1:8081",
     "localhost:80", "[::1]", "console.lan", "console.lan:8444", "127.0.0.1:8080.evil.example",
     "evil.example#127.0.0.1:8080", "[::1]:8080x"],
)  # fmt: skip
def test_anything_else_is_refused(host: str | None) -> None:
    assert not hosts.allows(ALLOWED, host)


def test_a_console_on_port_80_answers_without_a_port() -> None:
    assert hosts.allows(hosts.allow_list(80, ()), "127.0.0.1")


@pytest.mark.parametrize(
    ("address", "loopback"),
    [("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("[::1]", True),
     ("localhost", True), ("0.0.0.0", False), ("::", False), ("192.0.2.1", False),
     ("console.example", False)],
)  # fmt: skip
def test_only_loopback_addresses_count_as_loopback(address: str, loopback: bool) -> None:
    assert hosts.is_loopback(address) is loopback
