"""How numbers, ages and times print: the same text as console.js, so a refresh
never changes what a value looks like."""

from __future__ import annotations

from datetime import UTC, datetime

DASH = "\u2014"


def integer(value: int | None) -> str:
    return DASH if value is None else f"{value:,}"


def count(value: int | None, cap: int) -> str:
    """A capped count: anything above the cap prints as "cap+"."""
    if value is None:
        return DASH
    return f"{cap:,}+" if value > cap else f"{value:,}"


def age(seconds: float | None) -> str:
    if seconds is None:
        return DASH
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    if whole < 86400:
        return f"{whole // 3600} h {whole % 3600 // 60} min"
    return f"{whole // 86400} d {whole % 86400 // 3600} h"


def rate(value: float | None) -> str:
    """Messages per second, as console.js prints them."""
    return DASH if value is None else f"{value:.1f}"


def ratio(value: float | None) -> str:
    return DASH if value is None else f"{value:.2f}"


def timestamp(value: datetime | None) -> str:
    if value is None:
        return DASH
    moment = value.astimezone(UTC) if value.tzinfo else value
    return moment.strftime("%Y-%m-%d %H:%M:%S") + " UTC"


def online(value: bool) -> str:
    return "online" if value else "offline"


def text(value: object) -> str:
    return DASH if value is None else str(value)


FILTERS = {
    "integer": integer,
    "count": count,
    "age": age,
    "rate": rate,
    "ratio": ratio,
    "timestamp": timestamp,
    "online": online,
    "text": text,
}
