"""Fixtures for the lab's integration tests.

middleware   a real middleware process (Courier's launcher, no recording) on the
             test's database (``dsn``); its address is ``.address``
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from courier.server import launcher


@pytest.fixture
async def middleware(dsn: str, tmp_path: Path) -> AsyncIterator[launcher.Middleware]:
    process = launcher.Middleware.start(tmp_path / "logs", dsn=dsn, pool_size=4, open_login=True)
    try:
        await process.ready()
        yield process
    finally:
        await process.stopped()
