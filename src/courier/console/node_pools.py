"""Read-only pools on the cluster's other nodes, opened when first needed.

The console reads the control node (node 1); a member of a replicated queue on
another node keeps its messages there, so its length is read on that node. Each
such node gets a pool of one read-only connection, opened lazily with a short
timeout, so a node out of reach costs a page at most ``TIMEOUT_S`` and an error
shown for that node, never the page.
"""

from __future__ import annotations

import asyncio
import urllib.parse

import asyncpg

from courier import config

TIMEOUT_S = 2.0


class NodePools:
    """One pool per node id; a node whose DSN changed gets a new one. Its sessions
    run with ``server_settings`` and read only."""

    def __init__(self, server_settings: dict[str, str]) -> None:
        self._settings = {**server_settings, "default_transaction_read_only": "on"}
        self._pools: dict[int, tuple[str, asyncpg.Pool]] = {}
        self._lock = asyncio.Lock()

    async def pool(self, node_id: int, dsn: str) -> asyncpg.Pool:
        async with self._lock:
            known = self._pools.get(node_id)
            if known is not None and known[0] == dsn:
                return known[1]
            if known is not None:
                await known[1].close()
            opened = await asyncpg.create_pool(
                dsn,
                min_size=0,
                max_size=1,
                timeout=TIMEOUT_S,
                command_timeout=TIMEOUT_S,
                server_settings=self._settings,
            )
            self._pools[node_id] = (dsn, opened)
            return opened

    async def close(self) -> None:
        async with self._lock:
            for _, opened in self._pools.values():
                await opened.close()
            self._pools.clear()


def failure(dsn: str, exc: BaseException) -> str:
    """What went wrong reading a node, its password masked wherever it shows."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    parts = urllib.parse.urlsplit(dsn)
    query = urllib.parse.parse_qsl(parts.query)
    for password in [parts.password, *(value for key, value in query if key == "password")]:
        if password:
            text = text.replace(password, "***")
    return f"cannot read {config.redact_dsn(dsn)}: {text}"
