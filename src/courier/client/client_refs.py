"""Naming clients in client calls (a message's receiver): by id or by name.

A SEND carries its receiver as an id, and stays that way: it is the hot path. Names
are resolved with GET_CLIENT and cached for the client's life. Unlike a queue's
(see ``queue_refs``), a client's cached id cannot go stale: Courier neither deletes
nor renames clients, so a name stands for the same id for ever, and there is
nothing to forget and retry.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeAlias

from courier import models

ClientRef: TypeAlias = int | str
"""A client by id (int) or by name (str)."""


def given_id(ref: ClientRef | None) -> int | None:
    """The id when the ref is one (or None); None for a name, still to be looked up."""
    return None if isinstance(ref, str) else ref


def describe_missing(ref: ClientRef) -> str:
    """ClientNotFound's message, in the caller's words: ``no client named 'carol'``."""
    if isinstance(ref, str):
        return f"no client named {ref!r}"
    return f"no client with id {ref}"


class ClientNames:
    """Resolves client names to ids, caching name -> id."""

    def __init__(self, lookup: Callable[[str], Awaitable[models.ClientIdentity]]) -> None:
        self._lookup = lookup
        self._ids: dict[str, int] = {}

    def remember(self, client: models.ClientIdentity) -> None:
        self._ids[client.name] = client.id

    async def id(self, name: str) -> int:
        """The id of the client called ``name``; ClientNotFound (and nothing kept)."""
        known = self._ids.get(name)
        if known is not None:
            return known
        found = await self._lookup(name)
        self._ids[name] = found.id
        return found.id
