"""Query-string and path parameters, checked once: bad input is a BadRequest (400)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from courier import errors, models
from courier.console import rows, settings

MAX_SEARCH_CHARS = 255


@dataclass(frozen=True, slots=True)
class Paging:
    after: int
    limit: int


def optional_int(values: Mapping[str, str], name: str, *, minimum: int = 0) -> int | None:
    """An integer parameter; missing or empty means None."""
    text = values.get(name, "").strip()
    if not text:
        return None
    try:
        number = int(text)
    except ValueError:
        raise errors.BadRequest(f"{name} must be an integer, not {text!r}") from None
    if number < minimum:
        raise errors.BadRequest(f"{name} must be at least {minimum}")
    return number


def path_id(values: Mapping[str, object], name: str) -> int:
    """An id from the route (the route's int convertor already parsed it)."""
    value = values[name]
    assert isinstance(value, int)
    return value


def paging(values: Mapping[str, str], default_limit: int, after_name: str = "after") -> Paging:
    limit = optional_int(values, "limit", minimum=1) or default_limit
    if limit > settings.MAX_PAGE_SIZE:
        raise errors.BadRequest(f"limit must be at most {settings.MAX_PAGE_SIZE}")
    return Paging(after=optional_int(values, after_name) or 0, limit=limit)


def search(values: Mapping[str, str]) -> str:
    text = values.get("q", "").strip()
    if len(text) > MAX_SEARCH_CHARS:
        raise errors.BadRequest(f"search text must be at most {MAX_SEARCH_CHARS} characters")
    return text


def message_filters(values: Mapping[str, str]) -> rows.MessageFilters:
    priority = optional_int(values, "priority", minimum=models.MIN_PRIORITY)
    if priority is not None and priority > models.MAX_PRIORITY:
        raise errors.InvalidPriority()
    return rows.MessageFilters(
        sender=optional_int(values, "sender", minimum=1),
        receiver=optional_int(values, "receiver"),
        priority=priority,
    )


def queue_name(values: Mapping[str, object]) -> str:
    """The name for a new queue, from a form or a JSON body."""
    name = values.get("name")
    if not isinstance(name, str) or not name.strip():
        raise errors.BadRequest("a queue needs a name")
    return name.strip()


def message_ids(values: Mapping[str, object]) -> list[int] | None:
    """The ``message_ids`` of a JSON body: a list of message ids, or None (all)."""
    ids = values.get("message_ids")
    if ids is None:
        return None
    if not isinstance(ids, list) or not all(is_id(value) for value in ids):
        raise errors.BadRequest("message_ids must be a list of message ids")
    return [int(value) for value in ids]


def is_id(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
