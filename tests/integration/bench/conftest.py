"""Fixtures for the benchmarks' integration tests.

open_logins  (autouse) the benchmarks' clients log in by name alone, as on the
             open-login servers the benchmarks start: no default secrets here
"""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def open_logins(without_default_secrets: None) -> None:
    """The benchmarks run their own open-login servers (docs/operations.md)."""
