"""A cluster of database nodes: which there are, and adding or removing one.

The first node is the control node: its ``courier_nodes`` lists the cluster (no rows
means a cluster of that one node), and it keeps clients, sessions, the middleware
registry, topics and the directory of queue names (migration 0020). Node k hands
out queue, message and delivery ids from ``(k - 1) << 48`` on, so ``node_of`` tells
any of them's node with no lookup. These are control-plane operations, run by
`courier node` and the middleware's node watcher; requests go through
``courier.db.routing``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

import asyncpg

from courier import config, errors
from courier.db import _translate, schema

CONTROL_NODE = 1
ID_BITS = 48
"""Node k's ids start at (k - 1) << ID_BITS; 32 nodes keep every id below 2^53."""
MAX_NODES = 32


class NodeError(errors.CourierError):
    """A node cannot be added or removed as asked."""


@dataclass(frozen=True, slots=True)
class Node:
    id: int
    dsn: str
    state: str = "active"
    capacity: int | None = None

    @property
    def active(self) -> bool:
        return self.state == "active"


def node_of(object_id: int) -> int:
    """The node holding a queue, message or delivery id."""
    return (object_id >> ID_BITS) + 1


async def list_nodes(control_dsn: str) -> list[Node]:
    """Every node the control node knows, removed ones included, by id. A database
    that never had another node is a cluster of itself alone."""
    async with _connected(control_dsn) as connection:
        return await _nodes(connection, control_dsn)


async def add_node(control_dsn: str, dsn: str, capacity: int | None = None) -> Node:
    """Install the schema on ``dsn``, make it the next node and copy the clients to it.

    The new database must hold no queues and no clients. NodeError otherwise, or
    when the cluster is full; Unavailable when either database is out of reach."""
    async with _connected(dsn) as joining, _connected(control_dsn) as control:
        await _migrate(joining, dsn)
        known = await _nodes(control, control_dsn)
        if any(node.dsn == dsn for node in known):
            raise NodeError(f"{config.redact_dsn(dsn)} is already a node")
        node = Node(max(node.id for node in known) + 1, dsn, "active", capacity)
        if node.id > MAX_NODES:
            raise NodeError(f"a cluster has at most {MAX_NODES} nodes")
        # The row first: of two adds racing for the same id, one fails here, before its
        # database has become a node.
        try:
            await control.execute(
                "INSERT INTO courier_nodes (id, dsn) VALUES (1, $1) ON CONFLICT (id) DO NOTHING",
                control_dsn,
            )
            await control.execute(
                "INSERT INTO courier_nodes (id, dsn, capacity) VALUES ($1, $2, $3)",
                node.id, dsn, capacity,
            )  # fmt: skip
        except asyncpg.UniqueViolationError:
            raise NodeError(f"node {node.id} was just added by someone else; try again") from None
        try:
            await _call(joining, "SELECT courier_become_node_v1($1)", node.id)
        except NodeError:
            await control.execute("DELETE FROM courier_nodes WHERE id = $1", node.id)
            raise
        await _copy_clients(control, joining)
        return node


async def copy_clients(control_dsn: str, dsn: str) -> None:
    """Bring the node's copies of the clients up to date (a middleware linking it
    does this, for the clients registered while it was out of reach)."""
    async with _connected(control_dsn) as control, _connected(dsn) as node:
        await _copy_clients(control, node)


async def remove_node(control_dsn: str, node_id: int) -> Node:
    """Take a node out of the cluster. NodeError for the control node, an unknown
    node, or one that still holds queues (delete or move them first)."""
    if node_id == CONTROL_NODE:
        raise NodeError("node 1 is the control node and cannot be removed")
    async with _connected(control_dsn) as control:
        found = {node.id: node for node in await _nodes(control, control_dsn)}
        if node_id not in found or not found[node_id].active:
            raise NodeError(f"no active node {node_id}")
        held = await control.fetchval(
            "SELECT count(*) FROM courier_queue_homes WHERE node_id = $1", node_id
        )
        if held:
            raise NodeError(f"node {node_id} still holds {held} queue(s)")
        await control.execute("UPDATE courier_nodes SET state = 'removed' WHERE id = $1", node_id)
    removed = found[node_id]
    return Node(removed.id, removed.dsn, "removed", removed.capacity)


async def join(control_dsn: str, dsn: str) -> Node:
    """``dsn`` as a node of the cluster: added when it is no node yet, else the node it
    already is, with the DSN the control node keeps for it brought up to date (an
    embedded server may get another port when it starts again). NodeError when it is
    a node the cluster no longer has."""
    own = await self_id(dsn)
    if own == CONTROL_NODE:
        return await add_node(control_dsn, dsn)
    known = {node.id: node for node in await list_nodes(control_dsn)}
    if own not in known or not known[own].active:
        raise NodeError(f"{config.redact_dsn(dsn)} was node {own}, which the cluster no longer has")
    if known[own].dsn != dsn:
        await move_node(control_dsn, own, dsn)
    return Node(own, dsn, "active", known[own].capacity)


async def move_node(control_dsn: str, node_id: int, dsn: str) -> None:
    """Record that node ``node_id`` is now reached at ``dsn`` (a no-op for a node the
    control node keeps no row for: the control node of a cluster of one)."""
    async with _connected(control_dsn) as control:
        await control.execute("UPDATE courier_nodes SET dsn = $2 WHERE id = $1", node_id, dsn)


async def self_id(dsn: str) -> int:
    """Which node the database at ``dsn`` is: 1 until ``add_node`` made it another
    (an empty database, with no schema yet, too)."""
    async with _connected(dsn) as connection:
        if await connection.fetchval("SELECT to_regclass('courier_node_self')") is None:
            return CONTROL_NODE
        return int(await connection.fetchval("SELECT id FROM courier_node_self"))


async def queue_counts(control_dsn: str) -> dict[int, int]:
    """How many queues each node holds, by node id; a node holding none is absent."""
    async with _connected(control_dsn) as control:
        rows = await control.fetch(
            "SELECT node_id, count(*) AS held FROM courier_queue_homes GROUP BY node_id"
        )
    return {row["node_id"]: row["held"] for row in rows}


async def _nodes(connection: asyncpg.Connection, control_dsn: str) -> list[Node]:
    rows = await connection.fetch("SELECT id, dsn, state, capacity FROM courier_nodes ORDER BY id")
    found = [Node(row["id"], row["dsn"], row["state"], row["capacity"]) for row in rows]
    if not found or found[0].id != CONTROL_NODE:
        found.insert(0, Node(CONTROL_NODE, control_dsn))
    return found


async def _copy_clients(control: asyncpg.Connection, joining: asyncpg.Connection) -> None:
    rows = await control.fetch("SELECT id, name, mode, admin FROM courier_clients ORDER BY id")
    await joining.executemany(
        "SELECT courier_adopt_client_v1($1, $2, $3, $4)",
        [(row["id"], row["name"], row["mode"], row["admin"]) for row in rows],
    )


async def _migrate(connection: asyncpg.Connection, dsn: str) -> None:
    try:
        await schema.migrate(connection)
    except schema.MigrationError as exc:
        raise NodeError(f"{config.redact_dsn(dsn)}: {exc}") from exc


async def _call(connection: asyncpg.Connection, statement: str, *args: object) -> None:
    try:
        await connection.execute(statement, *args)
    except asyncpg.PostgresError as exc:
        raise NodeError(_translate.translate(exc).message) from exc


@asynccontextmanager
async def _connected(dsn: str) -> AsyncIterator[asyncpg.Connection]:
    try:
        connection = await asyncpg.connect(dsn, timeout=10)
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise errors.Unavailable(f"cannot reach {config.redact_dsn(dsn)}: {exc}") from exc
    try:
        yield connection
    finally:
        await connection.close()


def active(nodes: Sequence[Node]) -> list[Node]:
    return [node for node in nodes if node.active]
