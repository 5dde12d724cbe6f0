"""Fixtures for the benchmarks' integration tests.

open_logins  (autouse) no default secrets for library clients here: the benchmarks
             make their own (or log in by name alone on open-login servers)
"""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def open_logins(without_default_secrets: None) -> None:
    """The benchmarks run their own open-login servers (docs/operations.md)."""
