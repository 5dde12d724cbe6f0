"""Topic commands: `courier topic create|delete|show|list`, `courier subscribe`,
`courier unsubscribe` and `courier publish`.

A subscription is a queue called TOPIC:NAME, so the queue commands read it:

    courier topic create news --as alice
    courier subscribe news --as bob                  # durable: queue news:bob
    courier publish news "extra! extra!" --as alice
    courier receive news:bob --as bob

A non-durable subscription lives only as long as its connection, so
`courier subscribe --non-durable` stays connected and prints what arrives
(as `--follow` does for a durable one) until Ctrl-C, --count or --timeout.
"""

from __future__ import annotations

import functools
from typing import Any

import click

from courier import models
from courier.cli import client_commands, common
from courier.client import sync_client


@click.group(cls=common.Group)
def topic() -> None:
    """Create, delete, show and list topics."""


@topic.command()
@click.argument("name")
@common.client_options
def create(name: str) -> None:
    """Create a topic called NAME."""
    with common.client() as client:
        made = client.create_topic(name)
    common.emit(made, lambda: common.say(f"created topic {made.name!r} (id {made.id})"))


@topic.command()
@click.argument("topic_name", metavar="TOPIC")
@common.client_options
def delete(topic_name: str) -> None:
    """Delete TOPIC with its subscriptions, their queues and their messages (its
    owner, the client that created it, or an admin)."""
    topic_ref = client_commands.id_or_name(topic_name)
    with common.client() as client:
        client.delete_topic(topic_ref)
    common.emit({"deleted": topic_ref}, lambda: common.say(f"deleted {topic_name}"))


@topic.command()
@click.argument("topic_name", metavar="TOPIC")
@common.client_options
def show(topic_name: str) -> None:
    """Show TOPIC with its subscriptions and their backlogs."""
    with common.client() as client:
        found = client.get_topic(client_commands.id_or_name(topic_name))
    common.emit(found, lambda: show_topics([found]))


@topic.command(name="list")
@common.client_options
def list_topics() -> None:
    """List every topic with its subscriptions and their backlogs."""
    with common.client() as client:
        topics = client.list_topics()
    common.emit(topics, lambda: show_topics(topics))


def show_topics(topics: list[models.Topic]) -> None:
    if not topics:
        common.say("no topics yet")
        return
    rows: list[list[Any]] = []
    for found in topics:
        rows.append([found.id, found.name, "", "", "", ""])
        rows += [
            ["", "", s.name, s.queue_name, "durable" if s.durable else "non-durable", s.backlog]
            for s in found.subscriptions
        ]
    common.table("topics", ["id", "topic", "subscription", "queue", "kind", "backlog"], rows)


@click.command(cls=common.Command)
@click.argument("topic_name", metavar="TOPIC")
@click.option("--name", help="The subscription's name (durable default: your client name).")
@click.option(
    "--non-durable",
    is_flag=True,
    help="End the subscription, and its queue, when this command ends; implies --follow.",
)
@click.option("--follow", is_flag=True, help="Stay and print each message as it arrives.")
@click.option("--count", type=click.IntRange(min=1), help="With --follow: stop after N messages.")
@click.option(
    "--timeout", type=float, help="With --follow: stop after this many seconds without a message."
)
@common.client_options
def subscribe(
    topic_name: str,
    name: str | None,
    non_durable: bool,
    follow: bool,
    count: int | None,
    timeout: float | None,
) -> None:
    """Subscribe to TOPIC; a durable subscription's queue is TOPIC:NAME, read it with
    `courier receive`. Subscribing again under the same name resumes it."""
    with common.client() as client:
        made = client.subscribe(
            client_commands.id_or_name(topic_name), durable=not non_durable, name=name
        )
        kind = "durable" if made.durable else "non-durable"
        common.emit(
            made, lambda: common.say(f"subscribed ({kind}): messages arrive in {made.queue_name}")
        )
        if follow or non_durable:
            print_arrivals(client, made, count, timeout)


def print_arrivals(
    client: sync_client.Client,
    subscription: models.Subscription,
    count: int | None,
    timeout: float | None,
) -> None:
    """Print each message of the subscription as it comes, until count or silence."""
    taken = 0
    while count is None or taken < count:
        message = client.receive(subscription, timeout=timeout if timeout is not None else 60.0)
        if message is None:
            if timeout is not None:
                return
            continue
        taken += 1
        common.emit(client_commands.message_json(message), functools.partial(say_message, message))


def say_message(message: models.Message) -> None:
    client_commands.print_message(message, hint=False, in_shell=False)


@click.command(cls=common.Command)
@click.argument("queue_name", metavar="QUEUE")
@common.client_options
def unsubscribe(queue_name: str) -> None:
    """End the subscription whose queue is QUEUE (TOPIC:NAME, or its id); the queue
    and its messages go with it (its subscriber, the topic's owner or an admin)."""
    with common.client() as client:
        queue_id = client.get_queue(client_commands.id_or_name(queue_name)).id
        client.unsubscribe(queue_id)
    common.emit({"unsubscribed": queue_id}, lambda: common.say(f"unsubscribed {queue_name}"))


@click.command(cls=common.Command)
@click.argument("topic_name", metavar="TOPIC")
@click.argument("body", required=False)
@click.option("--file", help="Publish the bytes of this file (- reads stdin).")
@client_commands.receiver_option("Only this client (a name, or an id) may read the copies.")
@click.option("--priority", type=int, default=models.DEFAULT_PRIORITY, show_default=True)
@click.option("--context", type=int, help="Context number (for replies).")
@click.option("--delay", type=float, help="Seconds the copies stay invisible.")
@click.option("--ttl", type=float, help="Seconds after which an untaken copy expires.")
@click.option("--dedup-id", help="A retry with this id stores nothing twice.")
@client_commands.property_option("publish")
@client_commands.persistence_option("the copies")
@common.client_options
def publish(
    topic_name: str,
    body: str | None,
    file: str | None,
    receiver: int | str | None,
    priority: int,
    context: int | None,
    delay: float | None,
    ttl: float | None,
    dedup_id: str | None,
    properties: dict[str, models.PropertyValue],
    non_persistent: bool,
) -> None:
    """Publish BODY (- reads stdin), or --file, to TOPIC: one copy per subscription,
    all or none; prints the message id in each subscription's queue."""
    data = client_commands.read_body(body, file)
    with common.client() as client:
        copies = client.publish(
            client_commands.id_or_name(topic_name), data, receiver=receiver, priority=priority,
            context=context, delay=delay, ttl=ttl, dedup_id=dedup_id, properties=properties,
            persistent=not non_persistent,
        )  # fmt: skip
    common.emit({"copies": {str(q): m for q, m in copies.items()}}, lambda: say_published(copies))


def say_published(copies: dict[int, int]) -> None:
    if not copies:
        common.say("published to no one: the topic has no subscription")
        return
    listed = ", ".join(f"{message} in queue {queue}" for queue, message in copies.items())
    noun = "copy" if len(copies) == 1 else "copies"
    common.say(f"published {len(copies)} {noun}: message {listed}")
