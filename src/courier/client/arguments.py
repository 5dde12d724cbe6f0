"""Checking and normalising what callers pass to the client, before anything is sent."""

from __future__ import annotations

import secrets
from collections.abc import Sequence

from courier import config, errors, models
from courier.client import connection

Servers = str | Sequence[str | connection.Address]
"""``"host:port,host:port"``, or a list of ``"host:port"`` strings or (host, port) pairs."""

MAX_TIMEOUT_MS = 0xFFFF_FFFF
"""Server-side waits travel as u32 milliseconds (about 49 days)."""


def addresses(servers: Servers) -> tuple[connection.Address, ...]:
    """Normalise the ways of naming servers to (host, port) pairs; ValueError if bad."""
    texts = [servers] if isinstance(servers, str) else servers
    found: list[connection.Address] = []
    for server in texts:
        if not isinstance(server, str):
            host, port = server
            found.append((host, int(port)))
            continue
        try:
            found.extend(config.parse_servers(server))
        except ValueError:
            raise ValueError(f"{server!r} is not a list of host:port server addresses") from None
    if not found:
        raise ValueError("no server address given")
    return tuple(found)


def new_context() -> int:
    """A fresh request context: random, positive, 63 bits (fits a signed BIGINT)."""
    return secrets.randbits(63) or 1


def milliseconds(seconds: float) -> int:
    if seconds < 0:
        raise errors.BadRequest(f"timeout must not be negative, not {seconds:g}")
    return min(round(seconds * 1000), MAX_TIMEOUT_MS)


def order(order: models.Order | str) -> models.Order:
    try:
        return models.Order(order)
    except ValueError:
        raise errors.BadRequest(f"order must be 'time' or 'priority', not {order!r}") from None


def mode(mode: models.ClientMode | str) -> models.ClientMode:
    try:
        return models.ClientMode(mode)
    except ValueError:
        raise errors.BadRequest(f"mode must be 'read_write' or 'read_only', not {mode!r}") from None


def check_priority(priority: int) -> None:
    # Checked here too: the wire carries one byte, so 300 would not even encode.
    if not models.MIN_PRIORITY <= priority <= models.MAX_PRIORITY:
        raise errors.InvalidPriority(
            f"priority must be an integer from {models.MIN_PRIORITY} to {models.MAX_PRIORITY},"
            f" not {priority!r}"
        )
