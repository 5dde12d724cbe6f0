"""`courier node list|add|remove`: the PostgreSQL databases Courier spreads queues over.

    courier node list                   id, state, capacity, queues held, DSN (masked)
    courier node add DSN [--capacity N] make an empty database the next node; prints its id
    courier node remove ID              take a node that holds no queues out of the cluster

They talk to the control node (node 1): --dsn (COURIER_DSN), else the database of
`courier up` in the data dir. A refusal (NodeError) exits 1 and an unreachable
database (Unavailable) 13, as for every command (courier.cli.common).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

from courier import config, localstate
from courier.cli import common
from courier.cli.options import data_dir_option, shared_option
from courier.db import nodes

dsn_option = shared_option(
    "--dsn",
    shared_envvar="COURIER_DSN",
    default=None,
    help="The control node, node 1 (default: the database of `courier up`).",
)


@click.group(cls=common.Group)
def node() -> None:
    """List, add and remove the database nodes that hold the queues."""


@node.command("list")
@dsn_option
@data_dir_option
def list_nodes(dsn: str | None, data_dir: Path) -> None:
    """Every node, removed ones included, with the number of queues it holds."""
    found, held = asyncio.run(_listing(control_dsn(dsn, data_dir)))
    rows = [
        [each.id, each.state, each.capacity, held.get(each.id, 0), config.redact_dsn(each.dsn)]
        for each in found
    ]
    common.table(None, ["id", "state", "capacity", "queues", "dsn"], rows)


@node.command()
@click.argument("node_dsn", metavar="DSN")
@click.option(
    "--capacity", type=click.IntRange(min=1), default=None, help="Clients the node serves well."
)
@dsn_option
@data_dir_option
def add(node_dsn: str, capacity: int | None, dsn: str | None, data_dir: Path) -> None:
    """Install the schema on the empty database DSN and make it the next node."""
    added = asyncio.run(nodes.add_node(control_dsn(dsn, data_dir), node_dsn, capacity))
    common.note(f"added node {added.id}: {config.redact_dsn(added.dsn)}")
    common.say(str(added.id))


@node.command()
@click.argument("node_id", metavar="ID", type=int)
@dsn_option
@data_dir_option
def remove(node_id: int, dsn: str | None, data_dir: Path) -> None:
    """Take node ID out of the cluster; it must hold no queues."""
    removed = asyncio.run(nodes.remove_node(control_dsn(dsn, data_dir), node_id))
    common.say(f"removed node {removed.id}")


def control_dsn(dsn: str | None, data_dir: Path) -> str:
    found = dsn or localstate.local_dsn(data_dir)
    if found is None:
        raise click.UsageError("give --dsn, or start a local database with `courier up`")
    return found


async def _listing(control: str) -> tuple[list[nodes.Node], dict[int, int]]:
    return await nodes.list_nodes(control), await nodes.queue_counts(control)
