"""Messages from a JSON Lines file, for ``courier send --file messages.jsonl``.

Each line is one message: a JSON string (the body, as text), or an object with
``body`` (text) or ``body_base64`` (bytes), and any of ``receiver`` (a client id or
name), ``priority``,
``context``, ``delay``, ``ttl`` (seconds), ``dedup_id``, ``properties`` (an
object of strings) and ``persistent`` (true or false: false skips the database's
write-ahead log). Blank lines are skipped.
The messages go in batches of up to 1000 and 1 MiB of bodies, each batch stored all
or none.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

import click

from courier import config, models, protocol
from courier.client import Outgoing

FIELDS: dict[str, tuple[type, ...]] = {
    "receiver": (int, str),  # a client id, or its name
    "priority": (int,),
    "context": (int,),
    "delay": (int, float),
    "ttl": (int, float),
    "dedup_id": (str,),
}
"""The fields a line may give besides its body, and the JSON types each takes."""
KINDS: dict[tuple[type, ...], str] = {
    (int, str): "a client id or name",
    (int,): "an integer",
    (int, float): "a number",
    (str,): "a string",
}
"""How an error names what a field takes."""
BATCH_BYTES = config.Limits().max_batch_bytes


def is_jsonl(path: str | None) -> bool:
    return path is not None and path.endswith(".jsonl")


def read_messages(lines: Iterable[bytes]) -> list[Outgoing]:
    """Every message of the file; a bad line is a usage error naming its number."""
    messages = []
    for number, line in enumerate(lines, 1):
        if line.strip():
            try:
                messages.append(outgoing(parsed(line)))
            except (ValueError, TypeError, binascii.Error) as exc:
                raise click.BadParameter(f"line {number}: {exc}", param_hint="--file") from None
    if not messages:
        raise click.BadParameter("the file holds no message", param_hint="--file")
    return messages


def parsed(line: bytes) -> Any:
    try:
        return json.loads(line)
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})") from None


def outgoing(data: Any) -> Outgoing:
    if isinstance(data, str):
        return Outgoing(data)
    if not isinstance(data, dict):
        raise ValueError("a line is a JSON string or object")
    unknown = set(data) - set(FIELDS) - {"body", "body_base64", "properties", "persistent"}
    if unknown:
        raise ValueError(f"unknown field {sorted(unknown)[0]!r}")
    if ("body" in data) == ("body_base64" in data):
        raise ValueError("give body or body_base64, exactly one")
    for name in ("body", "body_base64"):
        if name in data and not isinstance(data[name], str):
            raise ValueError(f"{name} is a JSON string, not {json.dumps(data[name])}")
    for name, types in FIELDS.items():
        value = data.get(name)
        # bool is an int to Python, never to a reader of the file
        if value is not None and (isinstance(value, bool) or not isinstance(value, types)):
            kind = KINDS[types]
            raise ValueError(f"{name} is {kind}, not {json.dumps(value)}")
    body = (
        base64.b64decode(data["body_base64"], validate=True)
        if "body_base64" in data
        else data["body"]
    )
    fields = {name: data[name] for name in FIELDS if name in data}
    return Outgoing(
        body,
        properties=line_properties(data.get("properties")),
        persistent=line_persistence(data.get("persistent")),
        **fields,
    )


def receiver_names(messages: Iterable[Outgoing]) -> list[str]:
    """The receivers the lines name by name, each once, in order."""
    return list(dict.fromkeys(m.receiver for m in messages if isinstance(m.receiver, str)))


def line_persistence(value: Any) -> bool | None:
    """A line's ``persistent``: true or false (absent: the command's choice)."""
    if value is not None and not isinstance(value, bool):
        raise ValueError(f"persistent is true or false, not {json.dumps(value)}")
    return value


def line_properties(value: Any) -> dict[str, models.PropertyValue] | None:
    """A line's ``properties``: a JSON object whose values are strings, integers,
    numbers with a decimal point or an exponent (floats) or booleans, within limits."""
    if value is None:
        return None
    if not isinstance(value, dict) or not all(
        isinstance(v, str | int | float) for v in value.values()
    ):
        raise ValueError(
            f"properties is an object of strings, numbers and booleans, not {json.dumps(value)}"
        )
    problem = protocol.properties_problem(value)
    if problem:
        raise ValueError(problem)
    return value


PROPERTY_TYPES: dict[str, Callable[[str], models.PropertyValue]] = {
    "text": str,
    "int": int,
    "float": float,
    "bool": lambda text: {"true": True, "false": False}[text.lower()],
}
"""The types ``--property KEY:TYPE=VALUE`` names; plain ``KEY=VALUE`` is text."""


def property_options(options: Iterable[str]) -> dict[str, models.PropertyValue]:
    """``--property KEY=VALUE`` (text) and ``--property KEY:TYPE=VALUE`` (TYPE text,
    int, float or bool) options as properties; a bad one is refused before anything
    is sent.

    >>> property_options(["trace=a1", "amount:int=5", "price:float=2.5", "ok:bool=true"])
    {'trace': 'a1', 'amount': 5, 'price': 2.5, 'ok': True}
    """
    properties: dict[str, models.PropertyValue] = {}
    for option in options:
        key, value = property_option(option)
        if key in properties:
            raise click.BadParameter(f"{key!r} is given twice", param_hint="--property")
        properties[key] = value
    problem = protocol.properties_problem(properties)
    if problem:
        raise click.BadParameter(problem, param_hint="--property")
    return properties


def property_text(key: str, value: models.PropertyValue) -> str:
    """A property as ``--property`` takes it: ``KEY=VALUE`` for text, else typed.

    >>> [property_text(k, v) for k, v in {"t": "a", "n": 5, "x": 0.5, "ok": False}.items()]
    ['t=a', 'n:int=5', 'x:float=0.5', 'ok:bool=false']
    """
    if isinstance(value, str):
        typed_look = key.rpartition(":")[2] in PROPERTY_TYPES and ":" in key
        return f"{key}:text={value}" if typed_look else f"{key}={value}"
    if isinstance(value, bool):
        return f"{key}:bool={str(value).lower()}"
    return f"{key}:{'int' if isinstance(value, int) else 'float'}={value!r}"


def property_option(option: str) -> tuple[str, models.PropertyValue]:
    """One ``KEY=VALUE`` or ``KEY:TYPE=VALUE``; a key whose last ``:`` part is not a
    type is a plain key (``a:b=x`` is the text property ``a:b``)."""
    key, equals, text = option.partition("=")
    if not equals or not key:
        raise click.BadParameter(
            f"{option!r} is not KEY=VALUE or KEY:TYPE=VALUE", param_hint="--property"
        )
    name, colon, kind = key.rpartition(":")
    if not colon or not name or kind not in PROPERTY_TYPES:
        return key, text
    try:
        return name, PROPERTY_TYPES[kind](text)
    except (ValueError, KeyError):
        raise click.BadParameter(
            f"{option!r}: {text!r} is not a {kind}", param_hint="--property"
        ) from None


def batches(
    messages: list[Outgoing], properties: models.Properties | None = None
) -> Iterator[list[Outgoing]]:
    """The messages cut into batches the server takes by default; ``properties`` are
    those of the messages that give none of their own (they count towards a batch)."""
    batch: list[Outgoing] = []
    size = 0
    shared = protocol.properties_size(properties or {})
    for message in messages:
        length = len(message.body if isinstance(message.body, bytes) else message.body.encode())
        own = message.properties
        length += shared if own is None else protocol.properties_size(own)
        if batch and (len(batch) == protocol.MAX_BATCH_MESSAGES or size + length > BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(message)
        size += length
    if batch:
        yield batch


def open_lines(path: str, stdin: IO[bytes]) -> Iterable[bytes]:
    if path == "-":
        return stdin.readlines()
    try:
        with open(path, "rb") as file:
            return file.readlines()
    except OSError as exc:
        raise click.BadParameter(f"cannot read {path}: {exc.strerror}") from None
