"""`courier replicated create|show|delete`: queues spread over members on several nodes.

    courier replicated create orders --replicas 2 [--policy round_robin]
    courier replicated show orders      members, their nodes, producers, consumers, lengths
    courier replicated delete orders

Producers and consumers join through the client library (``client.producer(name)``,
``client.consumer(name)``); docs/nodes.md describes the whole.
"""

from __future__ import annotations

import click

from courier import models
from courier.cli import common


@click.group(cls=common.Group)
def replicated() -> None:
    """Create, show and delete replicated queues."""


@replicated.command()
@click.argument("name")
@click.option("--replicas", type=click.IntRange(min=1), required=True,
              help="Members, each on its own node.")  # fmt: skip
@click.option("--policy", type=click.Choice([p.value for p in models.Policy]),
              default=models.Policy.BALANCED.value, show_default=True,
              help="How producers and consumers are given members.")  # fmt: skip
@common.client_options
def create(name: str, replicas: int, policy: str) -> None:
    """Create the replicated queue NAME with its members."""
    with common.client() as client:
        made = client.create_replicated_queue(name, replicas, policy=policy)
    common.emit(made, lambda: show_members(made))


@replicated.command()
@click.argument("name")
@common.client_options
def show(name: str) -> None:
    """Show NAME's members with their producers, consumers and lengths."""
    with common.client() as client:
        found = client.get_replicated_queue(name)
    common.emit(found, lambda: show_members(found))


@replicated.command()
@click.argument("name")
@common.client_options
def delete(name: str) -> None:
    """Delete NAME, its members and their messages."""
    with common.client() as client:
        client.delete_replicated_queue(name)
    common.emit({"deleted": name}, lambda: common.say(f"deleted replicated queue {name}"))


def show_members(found: models.ReplicatedQueue) -> None:
    rows = [
        [m.member, m.node, m.queue_name, m.queue, m.producers, m.consumers, m.length]
        for m in found.members
    ]
    title = f"{found.name} ({found.policy.value})"
    columns = ["member", "node", "queue", "queue id", "producers", "consumers", "length"]
    common.table(title, columns, rows)
