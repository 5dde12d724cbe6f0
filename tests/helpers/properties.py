"""Typed message properties for the tests: one of every type and edge, and a view
of a property map that tells types apart (dict equality takes True for 1)."""

from __future__ import annotations

from courier import models

TYPED: dict[str, models.PropertyValue] = {
    "text": "façade ✓ 'q' \"d\" \\ $ @",
    "one": 1,
    "zero": 0,
    "low": -(2**63),
    "high": 2**63 - 1,
    "ratio": 0.1,
    "big": 1e300,
    "huge_whole": 1e20,
    "whole": 2.0,
    "tiny": 5e-324,
    "negative": -2.5e-5,
    "on": True,
    "off": False,
}


def typed(properties: models.Properties) -> list[tuple[str, type, object]]:
    """The properties as sorted (key, type, value) triples."""
    return sorted((key, type(value), value) for key, value in properties.items())
