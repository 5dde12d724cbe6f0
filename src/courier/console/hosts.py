"""Which Host headers the console answers to, against DNS rebinding.

A page on another site can point its own name at 127.0.0.1 and then read the
console as if it were that site; the browser still sends the other site's name as
the Host header. So a console on loopback answers only to the loopback names on
its own port, plus the names the operator allowed (``--allowed-host``).

    >>> allows(allow_list(8080, ("console.lan",)), "LOCALHOST:8080")
    True
    >>> allows(allow_list(8080, ()), "evil.example:8080")
    False
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def is_loopback(host: str) -> bool:
    """Whether a listen address is reachable from this machine only."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name other than localhost may resolve anywhere


def split_allowed(values: Iterable[str]) -> tuple[str, ...]:
    """``--allowed-host`` values, each possibly a comma-separated list."""
    return tuple(
        name.strip().lower() for value in values for name in value.split(",") if name.strip()
    )


def allow_list(port: int, extra: Iterable[str]) -> frozenset[str]:
    """The loopback names on ``port``, and each extra name as given (``name`` or
    ``name:port``)."""
    return frozenset([*(f"{name}:{port}" for name in LOOPBACK_NAMES), *split_allowed(extra)])


def name_of(host: str) -> str:
    """The host part of ``host[:port]`` (an IPv6 address keeps its brackets)."""
    if host.startswith("["):
        return host.partition("]")[0] + "]"
    return host.partition(":")[0]


def allows(allowed: frozenset[str], host_header: str | None) -> bool:
    """Whether a request's Host header names this console. An extra name given
    without a port matches it on any port (a reverse proxy's port 80 or 443)."""
    if not host_header:
        return False
    host = host_header.strip().lower()
    name = name_of(host)
    with_port = f"{host}:80" if name == host else host  # a browser omits port 80
    return with_port in allowed or name in allowed
