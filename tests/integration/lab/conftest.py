"""Fixtures for the lab's integration tests.

middleware   a real middleware process (Courier's launcher, no recording) on the
             test's database (``dsn``); its address is ``.address``
open_logins  (autouse) the lab's clients log in by name alone, as on the open-login
             servers the lab starts: no default secrets here
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from courier.server import launcher


@pytest.fixture(autouse=True)
def open_logins(without_default_secrets: None) -> None:
    """The lab runs its own open-login servers (docs/lab.md)."""


@pytest.fixture
async def middleware(dsn: str, tmp_path: Path) -> AsyncIterator[launcher.Middleware]:
    process = launcher.Middleware.start(tmp_path / "logs", dsn=dsn, pool_size=4, open_login=True)
    try:
        await process.ready()
        yield process
    finally:
        await process.stopped()
