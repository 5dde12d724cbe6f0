"""One-shot client commands: `courier send`, `courier pop`, `courier queue list`, ...

Each command connects, logs in as --as NAME, does one thing and logs out; the
interactive shell (`courier shell`) runs the very same commands on its own client.
Queues and clients (--receiver, --sender) are named by name, or by id when the
argument is all digits. Exit codes and the shared options are listed in
``courier.cli.common``.

Request/reply from the command line:

    courier request jobs "resize 17" --as alice --timeout 60       # waits for the reply
    courier receive jobs --as bob --json > job.json                # elsewhere: take it
    courier reply --as bob --to job.json "done"                    # and answer it

``courier reply`` answers the message in a file written by ``receive --json``
(``--to -`` reads it from stdin), or the one named by --queue, --receiver and
--context (which ``courier receive`` prints); in the shell, it answers the last
message received.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import sys
from collections.abc import Callable
from datetime import datetime
from typing import Any

import click

from courier import credentials, errors, models, protocol, scram
from courier.cli import batch_files, common, options

ORDER = click.Choice([order.value for order in models.Order])


def id_or_name(text: str) -> int | str:
    """A queue, topic or client argument: an id when it is all ASCII digits, else a
    name (a client or queue whose name is all digits is named by its id here)."""
    return int(text) if text.isascii() and text.isdigit() else text


def client_option(flag: str, text: str) -> Callable[[options.F], options.F]:
    """``flag`` CLIENT: a client's name, or its id when all digits; a name is looked
    up when the command runs (ClientNotFound, exit 7, when nobody has it)."""
    return click.option(
        flag,
        metavar="CLIENT",
        callback=lambda ctx, param, value: None if value is None else id_or_name(value),
        help=text,
    )


def receiver_option(text: str) -> Callable[[options.F], options.F]:
    """--receiver CLIENT (see ``client_option``)."""
    return client_option("--receiver", text)


def read_body(body: str | None, path: str | None = None) -> bytes:
    """The message body as bytes: BODY as UTF-8 text, or the bytes of --file PATH;
    ``-`` for either reads standard input."""
    if (body is None) == (path is None):
        raise click.UsageError("give the body as BODY or as --file PATH, not both")
    source = body if path is None else path
    if source == "-":
        return sys.stdin.buffer.read()
    if path is not None:
        try:
            with open(path, "rb") as file:
                return file.read()
        except OSError as exc:
            raise click.BadParameter(f"cannot read {path}: {exc.strerror}") from None
    assert body is not None
    return body.encode()


# -- clients ---------------------------------------------------------------------------


@click.command(cls=common.Command)
@click.argument("name")
@click.option("--read-only", is_flag=True, help="The client may read but never send.")
@click.option(
    "--password",
    is_flag=True,
    help="Choose its secret (asked for, hidden) instead of a random one.",
)
@common.client_options
def register(name: str, read_only: bool, password: bool) -> None:
    """Register a client called NAME (then use it with --as NAME).

    Its secret (random, or --secret, or --password) is kept in the credentials file of
    the data dir, readable by this user only; only its SCRAM verifier is sent."""
    mode = models.ClientMode.READ_ONLY if read_only else models.ClientMode.READ_WRITE
    secret = chosen_secret(password)
    with common.client(login=False) as client:
        info = client.register(name, mode, secret=secret)
    kept = credentials.save(common.options().data_dir, name, secret)
    common.emit(info, lambda: common.say(
        f"registered client {info.name!r}: id {info.id}, {mode}; its secret is in {kept}"
    ))  # fmt: skip


def chosen_secret(password: bool) -> str:
    """--secret, else a password asked for with --password, else a random secret."""
    given = common.options().secret
    if given:
        return given
    if password:
        asked: str = click.prompt("secret", hide_input=True, confirmation_prompt=True)
        return asked
    return scram.new_secret()


@click.command(cls=common.Command)
@common.client_options
def ping() -> None:
    """Measure the round trip to a server."""
    with common.client(login=False) as client:
        seconds = client.ping()
        server = client.server
    result = {"server": server, "round_trip_ms": seconds * 1000}
    common.emit(result, lambda: common.say(f"pong from {server} in {seconds * 1000:.2f} ms"))


# -- queues ----------------------------------------------------------------------------


@click.group(cls=common.Group)
def queue() -> None:
    """Create, delete, show and list queues."""


@queue.command()
@click.argument("name")
@common.client_options
def create(name: str) -> None:
    """Create a queue called NAME."""
    with common.client() as client:
        made = client.create_queue(name)
    common.emit(made, lambda: common.say(f"created queue {made.name!r} (id {made.id})"))


@queue.command()
@click.argument("queue_name", metavar="QUEUE")
@click.option("--if-empty", is_flag=True, help="Refuse if messages remain.")
@common.client_options
def delete(queue_name: str, if_empty: bool) -> None:
    """Delete QUEUE and every message in it."""
    with common.client() as client:
        client.delete_queue(id_or_name(queue_name), if_empty=if_empty)
    common.emit({"deleted": id_or_name(queue_name)}, lambda: common.say(f"deleted {queue_name}"))


@queue.command()
@click.argument("queue_name", metavar="QUEUE")
@common.client_options
def show(queue_name: str) -> None:
    """Show QUEUE with its message count, and its access lists to its owner or an
    admin when it has any."""
    with common.client() as client:
        found = client.get_queue(id_or_name(queue_name))
        try:
            acl: models.QueueAcl | None = client.queue_acl(found.id)
        except errors.NotAuthorised:
            acl = None

    def text() -> None:
        show_queues(None, [found])
        if acl is not None and (acl.senders is not None or acl.readers is not None):
            common.say(describe_acl(acl))

    common.emit(found, text)


@queue.command(name="acl")
@click.argument("queue_name", metavar="QUEUE")
@click.option("--senders", help="Who may send: client names or ids, comma-separated.")
@click.option("--readers", help="Who may read: client names or ids, comma-separated.")
@click.option("--open", is_flag=True, help="Let anyone send and read (clear both).")
@common.client_options
def queue_acl(queue_name: str, senders: str | None, readers: str | None, open: bool) -> None:
    """Show or set who may send to QUEUE and who may read it (its owner and admins
    always may). A list not given stays as it is; an empty one ("") leaves only the
    owner and admins. Only the owner or an admin may do this."""
    if open and (senders is not None or readers is not None):
        raise click.UsageError("give --open, or --senders/--readers, not both")
    with common.client() as client:
        ref = id_or_name(queue_name)
        if open:
            acl = client.set_queue_acl(ref)
        elif senders is None and readers is None:
            acl = client.queue_acl(ref)
        else:
            now = client.queue_acl(ref)
            acl = client.set_queue_acl(
                ref,
                senders=now.senders if senders is None else client_list(senders),
                readers=now.readers if readers is None else client_list(readers),
            )
    common.emit(acl, lambda: common.say(describe_acl(acl)))


def client_list(text: str) -> list[int | str]:
    """Comma-separated clients: ids when all digits, else names."""
    return [id_or_name(item) for item in (part.strip() for part in text.split(",")) if item]


def describe_acl(acl: models.QueueAcl) -> str:
    def who(clients: tuple[int, ...] | None) -> str:
        if clients is None:
            return "anyone"
        return (
            ", ".join(f"client {c}" for c in clients) + " (and the owner and admins)"
            if clients
            else "only the owner and admins"
        )

    return f"queue {acl.queue}: may send: {who(acl.senders)}; may read: {who(acl.readers)}"


@queue.command(name="list")
@common.client_options
def list_queues() -> None:
    """List every queue with its message count."""
    with common.client() as client:
        queues = client.list_queues()
    common.emit(queues, lambda: show_queues("queues", queues, empty="no queues yet"))


@queue.command()
@click.argument("queue_name", metavar="QUEUE")
@click.option("--max-deliveries", type=click.IntRange(min=1), help="Leases before a dead letter.")
@click.option("--dead-letter-queue", help="Where failed (and, with the flag, expired) messages go.")
@click.option("--dead-letter-expired", is_flag=True, help="Expired messages become dead letters.")
@click.option("--max-messages", type=click.IntRange(min=1), help="Messages it may hold.")
@click.option("--max-bytes", type=click.IntRange(min=1), help="Bytes of bodies it may hold.")
@click.option(
    "--overflow",
    type=click.Choice([overflow.value for overflow in models.Overflow]),
    default=models.Overflow.REFUSE.value,
    show_default=True,
    help="At its limit: refuse a send, or drop the oldest messages.",
)
@common.client_options
def configure(
    queue_name: str,
    max_deliveries: int | None,
    dead_letter_queue: str | None,
    dead_letter_expired: bool,
    max_messages: int | None,
    max_bytes: int | None,
    overflow: str,
) -> None:
    """Set how QUEUE treats messages that keep failing or expire, and its limits."""
    with common.client() as client:
        settings = client.configure_queue(
            id_or_name(queue_name),
            max_deliveries=max_deliveries,
            dead_letter_queue=None if dead_letter_queue is None else id_or_name(dead_letter_queue),
            dead_letter_expired=dead_letter_expired,
            max_messages=max_messages,
            max_bytes=max_bytes,
            overflow=overflow,
        )
    common.emit(settings, lambda: common.say(describe_settings(settings)))


def describe_settings(settings: models.QueueSettings) -> str:
    limit = settings.max_deliveries or "unlimited"
    target = settings.dead_letter_queue or "none (dropped)"
    expired = "dead-lettered" if settings.dead_letter_expired else "dropped"
    size = ", ".join(
        f"{what} {value}"
        for what, value in (("max messages", settings.max_messages),
                            ("max bytes", settings.max_bytes))
        if value is not None
    )  # fmt: skip
    limits = f", {size} ({settings.overflow.value.replace('_', ' ')} beyond)" if size else ""
    return (
        f"queue {settings.queue}: max deliveries {limit}, dead-letter queue {target},"
        f" expired messages {expired}{limits}"
    )


@click.command(cls=common.Command)
@common.client_options
def waiting() -> None:
    """List the queues holding messages I can read, with how many."""
    with common.client() as client:
        queues = client.queues_for_me()
    common.emit(queues, lambda: show_queues("messages for me", queues, empty="nothing for me"))


def show_queues(title: str | None, queues: list[models.Queue], empty: str = "") -> None:
    if not queues:
        common.say(empty)
        return
    rows: list[list[Any]] = [[q.id, q.name, q.message_count] for q in queues]
    common.table(title, ["id", "name", "messages"], rows)


# -- messages --------------------------------------------------------------------------


def property_option(command: str) -> Callable[[options.F], options.F]:
    """--property KEY=VALUE, repeatable, as the properties of the message sent; a bad
    one is refused while the options are read, before anything connects."""
    return click.option(
        "--property",
        "properties",
        multiple=True,
        metavar="KEY=VALUE",
        envvar=f"COURIER_{command.upper()}_PROPERTY",  # the rule names the flag
        callback=lambda ctx, param, value: batch_files.property_options(value),
        help=(
            "A property the message carries to its reader: KEY=VALUE (text) or"
            " KEY:TYPE=VALUE with TYPE int, float, bool or text; repeat for more."
        ),
    )


def persistence_option(what: str) -> Callable[[options.F], options.F]:
    """--non-persistent: the message skips the database's write-ahead log."""
    return click.option(
        "--non-persistent",
        "non_persistent",
        is_flag=True,
        help=f"Store {what} without the database's write-ahead log: faster, but lost if"
        " the database crashes (see docs/architecture.md, Delivery modes).",
    )


@click.command(cls=common.Command)
@click.argument("queues", nargs=-1, required=True, metavar="QUEUE... [BODY]")
@click.option(
    "--file",
    help="Send the bytes of this file (- reads stdin) as the body; a .jsonl file holds one"
    " message per line, sent in batches (see --jsonl).",
)
@click.option(
    "--jsonl",
    is_flag=True,
    help="Read --file as JSON Lines whatever its name: each line a JSON string (the body) or"
    " an object with body (or body_base64), receiver (a client name or id), priority, context,"
    " delay, ttl,"
    " dedup_id, properties (an object of strings, integers, numbers with a point and"
    " booleans) and persistent (true or false); sent in"
    " batches of up to 1000"
    " messages, each batch all or none.",
)
@receiver_option("Only this client (a name, or an id: all digits) may read it.")
@click.option("--priority", type=int, default=models.DEFAULT_PRIORITY, show_default=True)
@click.option("--context", type=int, help="Context number (for replies).")
@click.option("--delay", type=float, help="Seconds the message stays invisible.")
@click.option("--ttl", type=float, help="Seconds after which an untaken message expires.")
@click.option("--dedup-id", help="A retry with this id stores nothing twice.")
@property_option("send")
@persistence_option("the message")
@common.client_options
def send(
    queues: tuple[str, ...],
    file: str | None,
    jsonl: bool,
    receiver: int | str | None,
    priority: int,
    context: int | None,
    delay: float | None,
    ttl: float | None,
    dedup_id: str | None,
    properties: dict[str, models.PropertyValue],
    non_persistent: bool,
) -> None:
    """Send BODY (- reads stdin), or the file given by --file, to one or more queues;
    prints the message ids."""
    names, body = (queues, None) if file is not None else (queues[:-1], queues[-1])
    if not names:
        raise click.UsageError("name at least one queue, then the body")
    refs = [id_or_name(name) for name in names]
    if file is not None and (jsonl or batch_files.is_jsonl(file)):
        if dedup_id is not None:
            raise click.UsageError("with a JSON Lines file, each line carries its own dedup_id")
        send_lines(refs, file, receiver=receiver, priority=priority, context=context,
                   delay=delay, ttl=ttl, properties=properties,
                   persistent=not non_persistent)  # fmt: skip
        return
    data = read_body(body, file)
    with common.client() as client:
        ids = client.send(
            refs, data, receiver=receiver, priority=priority, context=context, delay=delay,
            ttl=ttl, dedup_id=dedup_id, properties=properties, persistent=not non_persistent,
        )  # fmt: skip
    listed = ", ".join(map(str, ids))
    common.emit({"message_ids": ids}, lambda: common.say(f"sent message {listed}"))


def send_lines(refs: list[int | str], path: str, **defaults: Any) -> None:
    """Every message of a JSON Lines file, batch by batch; prints the ids."""
    messages = batch_files.read_messages(batch_files.open_lines(path, sys.stdin.buffer))
    ids: list[list[int]] = []
    with common.client() as client:
        for name in batch_files.receiver_names(messages):  # an unknown one, before any batch
            client.get_client(name)
        for batch in batch_files.batches(messages, defaults.get("properties")):
            try:
                ids += client.send_many(refs, batch, **defaults)
            except errors.CourierError as exc:
                if not ids:
                    raise
                raise type(exc)(
                    f"{len(ids)} of {len(messages)} messages were stored before a batch"
                    f" failed: {exc.message}"
                ) from None
    first, last = ids[0][0], ids[-1][0]
    common.emit(
        {"message_ids": ids},
        lambda: common.say(f"sent {len(ids)} messages (ids {first} to {last} in {refs[0]})"),
    )


def read_options(command: Any) -> Any:
    command = click.option(
        "--selector",
        metavar="EXPRESSION",
        help="Only messages whose properties match, e.g. \"kind = 'order' AND amount > 100\""
        " (=, <>, <, <=, >, >=, [NOT] IN (...), IS [NOT] NULL, AND, OR, NOT; docs/selectors.md).",
    )(command)
    sender = client_option("--sender", "Only messages from this client (a name, or an id).")
    command = sender(command)
    return click.option("--order", type=ORDER, default="time", show_default=True)(command)


lease_option = click.option(
    "--lease",
    type=float,
    help="Lease the message for this many seconds instead of deleting it: settle it with"
    " `courier ack ID` (or nack); unsettled, it is delivered again.",
)


@click.command(cls=common.Command)
@click.argument("queue_name", metavar="[QUEUE]", required=False)
@read_options
@common.client_options
def peek(
    queue_name: str | None, sender: int | str | None, order: str, selector: str | None
) -> None:
    """Show the next message for me without taking it (exit 6 if none)."""
    with common.client() as client:
        message = client.peek(
            None if queue_name is None else id_or_name(queue_name), sender=sender, order=order,
            selector=selector,
        )  # fmt: skip
    show_message(message)


@click.command(cls=common.Command)
@click.argument("queue_name", metavar="[QUEUE]", required=False)
@read_options
@lease_option
@common.client_options
def pop(
    queue_name: str | None, sender: int | str | None, order: str, selector: str | None,
    lease: float | None,
) -> None:  # fmt: skip
    """Take the next message for me (exit 6 if none)."""
    with common.client() as client:
        message = client.pop(
            None if queue_name is None else id_or_name(queue_name), sender=sender, order=order,
            lease=lease, selector=selector,
        )  # fmt: skip
    show_message(message)


@click.command(cls=common.Command)
@click.argument("queue_name", metavar="QUEUE")
@click.option("--timeout", type=float, default=30.0, show_default=True, help="Seconds to wait.")
@click.option(
    "--max",
    "max_count",
    envvar="COURIER_RECEIVE_MAX",
    type=click.IntRange(1, protocol.MAX_BATCH_MESSAGES),
    help="Take up to this many in one request, as soon as there is one (--json: a list).",
)
@read_options
@lease_option
@common.client_options
def receive(
    queue_name: str,
    timeout: float,
    max_count: int | None,
    sender: int | str | None,
    order: str,
    selector: str | None,
    lease: float | None,
) -> None:
    """Take the next message for me, waiting for one to arrive (exit 6 on timeout)."""
    none = f"no message arrived within {timeout:g}s"
    with common.client() as client:
        if max_count is not None:
            messages = client.receive_many(
                id_or_name(queue_name), max_messages=max_count, timeout=timeout, sender=sender,
                order=order, lease=lease, selector=selector,
            )  # fmt: skip
            show_messages(messages, none)
            return
        message = client.receive(
            id_or_name(queue_name), timeout=timeout, sender=sender, order=order, lease=lease,
            selector=selector,
        )  # fmt: skip
    show_message(message, none)


@click.command(cls=common.Command)
@click.argument("deliveries", metavar="DELIVERY...", type=int, nargs=-1, required=True)
@common.client_options
def ack(deliveries: tuple[int, ...]) -> None:
    """Acknowledge leased messages by their DELIVERY ids: done and deleted (several in
    one request; one whose lease ran out fails no other)."""
    with common.client() as client:
        if len(deliveries) == 1:
            client.ack(deliveries[0])
            settled = [models.Settled(deliveries[0])]
        else:
            settled = client.ack_many(deliveries)
    report_settled(settled, "acknowledged")


@click.command(cls=common.Command)
@click.argument("deliveries", metavar="DELIVERY...", type=int, nargs=-1, required=True)
@click.option("--delay", type=float, default=0.0, help="Seconds before they are visible again.")
@click.option("--reason", help="Why they failed (kept with a dead letter).")
@common.client_options
def nack(deliveries: tuple[int, ...], delay: float, reason: str | None) -> None:
    """Give leased messages back by their DELIVERY ids, to be delivered again (several
    in one request; one whose lease ran out fails no other)."""
    with common.client() as client:
        if len(deliveries) == 1:
            client.nack(deliveries[0], delay=delay, reason=reason)
            settled = [models.Settled(deliveries[0])]
        else:
            settled = client.nack_many(deliveries, delay=delay, reason=reason)
    report_settled(settled, "released")


def failure_text(settled: models.Settled) -> str:
    """The server's reason, which names the delivery itself in most cases; prefixed
    with it where it does not."""
    named, message = f"delivery {settled.delivery}", settled.message or "not settled"
    return message if f"{named} " in f"{message} " else f"{named}: {message}"


def report_settled(settled: list[models.Settled], done: str) -> None:
    """Print what became of each delivery; leave with LEASE_EXPIRED's exit code when
    any was not settled."""
    settled_ids = [each.delivery for each in settled if each.ok]
    failed = [each for each in settled if not each.ok]
    if len(settled) == 1 and not failed:
        data: dict[str, Any] = {done: settled_ids[0]}
    else:
        data = {done: settled_ids, "failed": [dataclasses.asdict(each) for each in failed]}
    verb = "acknowledged" if done == "acknowledged" else "gave back"

    def say() -> None:
        if settled_ids:
            common.say(f"{verb} {', '.join(str(each) for each in settled_ids)}")

    common.emit(data, say)
    for each in failed:
        click.echo(f"error: {failure_text(each)}", err=True)
    if failed:
        raise click.exceptions.Exit(common.exit_code(errors.LeaseExpired()))


@click.command(cls=common.Command)
@click.argument("delivery", type=int)
@click.argument("seconds", type=float)
@common.client_options
def extend(delivery: int, seconds: float) -> None:
    """Hold a leased message longer: its lease now ends SECONDS from now."""
    with common.client() as client:
        client.extend(delivery, seconds)
    common.emit(
        {"extended": delivery, "seconds": seconds},
        lambda: common.say(f"lease of {delivery} now ends in {seconds:g}s"),
    )


@click.command(cls=common.Command)
@click.argument("queue_name", metavar="QUEUE")
@click.argument("body")
@click.option("--timeout", type=float, default=30.0, show_default=True, help="Seconds to wait.")
@receiver_option("Only this client (a name, or an id) may take the request.")
@click.option("--priority", type=int, default=models.DEFAULT_PRIORITY, show_default=True)
@property_option("request")
@common.client_options
def request(
    queue_name: str,
    body: str,
    timeout: float,
    receiver: int | str | None,
    priority: int,
    properties: dict[str, models.PropertyValue],
) -> None:
    """Send BODY (- reads stdin) to QUEUE as a request and wait for the reply (exit 15
    on timeout)."""
    with common.client() as client:
        answer = client.request(
            id_or_name(queue_name),
            read_body(body),
            timeout=timeout,
            receiver=receiver,
            priority=priority,
            properties=properties,
        )
    show_message(answer, how_to_reply=False)


@click.command(cls=common.Command)
@click.argument("body")
@click.option("--to", type=click.File("r"), help="A message from `receive --json`; - is stdin.")
@click.option("--queue", help="Queue of the request (with --receiver, --context).")
@receiver_option("The requester: its client name, or its id.")
@click.option("--context", type=int, help="Context of the request.")
@click.option("--priority", type=int, default=models.DEFAULT_PRIORITY, show_default=True)
@property_option("reply")
@common.client_options
def reply(
    body: str,
    to: Any,
    queue: str | None,
    receiver: int | str | None,
    context: int | None,
    priority: int,
    properties: dict[str, models.PropertyValue],
) -> None:
    """Answer a request message with BODY.

    Name the request with --to FILE (what `courier receive --json` printed; - reads
    stdin), or with --queue, --receiver and --context; in the shell, the last message
    read is answered when none is named.
    """
    # Read the request before logging in: piped from `courier receive --as NAME`, the
    # input ends only once that process has logged NAME out.
    request = request_to_answer(to, (queue, receiver, context))
    with common.client() as client:
        if request is not None:
            message_id = client.reply(request, body, priority=priority, properties=properties)
        else:
            target = id_or_name(queue or "")
            sent = client.send(
                target, body, receiver=receiver, priority=priority, context=context,
                properties=properties,
            )  # fmt: skip
            message_id = sent[0]
    common.emit({"message_id": message_id}, lambda: common.say(f"sent reply {message_id}"))


def request_to_answer(to_file: Any, explicit: tuple[object, ...]) -> models.Message | None:
    """The message named by --to, or the shell's last one; None when given explicitly."""
    if to_file is not None:
        return message_from_json(to_file.read())
    if None not in explicit:
        return None
    shell = common.shell_state()
    if any(value is not None for value in explicit) or shell is None or shell.last_message is None:
        raise click.UsageError(
            "say what to answer: --to FILE, or --queue, --receiver and --context"
        )
    return shell.last_message


def message_json(message: models.Message) -> dict[str, Any]:
    """A message for --json: the body as text when it is UTF-8, else as base64."""
    data = dataclasses.asdict(message)
    data["created_at"] = message.created_at.isoformat()
    try:
        data["body"] = message.body.decode()
    except UnicodeDecodeError:
        del data["body"]
        data["body_base64"] = base64.b64encode(message.body).decode()
    return data


def message_from_json(text: str) -> models.Message:
    """A message as ``receive --json`` printed it."""
    try:
        data = json.loads(text)
        if "body_base64" in data:
            body = base64.b64decode(data["body_base64"], validate=True)
        else:
            body = str(data.get("body", "")).encode()
        return models.Message(
            id=int(data["id"]),
            queue=int(data["queue"]),
            sender=int(data["sender"]),
            receiver=data.get("receiver"),
            context=data.get("context"),
            priority=int(data.get("priority", models.DEFAULT_PRIORITY)),
            created_at=datetime.fromisoformat(data["created_at"]),
            body=body,
            properties=dict(data.get("properties") or {}),
        )
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise click.BadParameter(f"not a message from `courier receive --json`: {exc}") from exc


def printable_body(body: bytes) -> str:
    """The body as text, or a short description of bytes that are not UTF-8."""
    try:
        return body.decode()
    except UnicodeDecodeError:
        preview = body[:32].hex(" ")
        more = " ..." if len(body) > 32 else ""
        return f"<{len(body)} bytes, not UTF-8: {preview}{more}>"


def show_message(
    message: models.Message | None, none: str = "no message", *, how_to_reply: bool = True
) -> None:
    """Print a message read, or fail with NoMessage (exit code 6) if there was none."""
    shell = common.shell_state()
    if message is None:
        common.emit(None, lambda: None)
        raise errors.NoMessage(none)
    if shell is not None:
        shell.last_message = message
    hint = how_to_reply and message.context is not None
    common.emit(
        message_json(message), lambda: print_message(message, hint=hint, in_shell=shell is not None)
    )


def show_messages(messages: list[models.Message], none: str) -> None:
    """Print the messages of a batch read, or fail with NoMessage (exit 6) if none."""
    if not messages:
        common.emit([], lambda: None)
        raise errors.NoMessage(none)
    shell = common.shell_state()
    if shell is not None:
        shell.last_message = messages[-1]

    def human() -> None:
        for message in messages:
            print_message(message, hint=False, in_shell=shell is not None)

    common.emit([message_json(message) for message in messages], human)


def print_message(message: models.Message, *, hint: bool, in_shell: bool) -> None:
    to = "anyone" if message.receiver is None else f"client {message.receiver}"
    common.say(
        f"message {message.id} in queue {message.queue} from client {message.sender} to {to}"
        f" (priority {message.priority}, {message.created_at.astimezone():%Y-%m-%d %H:%M:%S})"
    )
    if message.dead_from is not None:
        common.note(f"(dead letter from queue {message.dead_from}: {message.failure or 'failed'})")
    if message.properties:
        listed = ", ".join(
            batch_files.property_text(key, value) for key, value in message.properties.items()
        )
        common.say(f"properties: {listed}")
    common.say(printable_body(message.body))
    if message.delivery is not None:
        settle = "ack ID" if in_shell else "courier ack ID"
        common.note(
            f"(delivery {message.delivery}, delivery #{message.deliveries};"
            f" settle with: {settle.replace('ID', str(message.delivery))})"
        )
    if not hint:
        return
    if in_shell:
        common.note(f"(context {message.context}; answer with: reply BODY)")
    else:
        common.note(
            f"(context {message.context}; answer with: courier reply --queue {message.queue}"
            f" --receiver {message.sender} --context {message.context} BODY)"
        )
