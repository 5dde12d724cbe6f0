"""Names no other test of the session has used, so tests can share a database."""

from __future__ import annotations

import itertools
from collections.abc import Callable

Unique = Callable[[str], str]
"""The ``unique`` fixture: ``unique("alice")`` is e.g. ``"alice-17"``."""

_numbers = itertools.count(1)


def unique_name(prefix: str) -> str:
    return f"{prefix}-{next(_numbers)}"
