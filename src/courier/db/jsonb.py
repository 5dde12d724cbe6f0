"""Properties as jsonb text, typed both ways.

jsonb keeps JSON's types: text, booleans and numbers (PostgreSQL numeric, exact).
An integer is written as its digits; a float always with a decimal point and never
with an exponent, and numeric keeps that scale, so what comes back tells the two
apart: ``5`` is an integer, ``5.0`` a float, ``100000000000000000000.0`` the float
1e20. Selectors compare the numbers exactly (docs/selectors.md).
"""

from __future__ import annotations

import json
from decimal import Decimal

from courier import models


def dumps(properties: models.Properties) -> str | None:
    """The jsonb text of a message's properties; None for none.

    >>> dumps({"n": 5, "x": 1e20, "ok": True, "s": "a"})
    '{"n": 5, "x": 100000000000000000000.0, "ok": true, "s": "a"}'
    """
    if not properties:
        return None
    parts = (f"{json.dumps(key)}: {value_text(value)}" for key, value in properties.items())
    return "{" + ", ".join(parts) + "}"


def value_text(value: models.PropertyValue) -> str:
    """One value as JSON; a float in positional notation with a decimal point."""
    if isinstance(value, float):
        return float_text(value)
    return json.dumps(value)


def float_text(value: float) -> str:
    """The shortest decimal that reads back as ``value``, positional, with a point.

    >>> float_text(0.1), float_text(1e20), float_text(-2.5e-5), float_text(3.0)
    ('0.1', '100000000000000000000.0', '-0.000025', '3.0')
    """
    text = format(Decimal(repr(value)), "f")
    return text if "." in text else text + ".0"


def loads(stored: str | None) -> dict[str, models.PropertyValue]:
    """A message's properties from their jsonb text (NULL: none); numbers with a
    decimal point are floats, the others integers."""
    if stored is None:
        return {}
    properties: dict[str, models.PropertyValue] = json.loads(stored)
    return properties
