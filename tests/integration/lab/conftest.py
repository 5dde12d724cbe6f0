"""Fixtures for the lab's integration tests.

middleware   a real middleware process (the runner's own launcher, no recording)
             on the test's database (``dsn``); its address is ``.options.address``
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from courier.lab import processes


@pytest.fixture
async def middleware(dsn: str, tmp_path: Path) -> AsyncIterator[processes.MiddlewareProcess]:
    options = processes.MiddlewareOptions(
        dsn=dsn, port=processes.free_port(), record_dir=None, run_id="", pool_size=4
    )
    process = processes.MiddlewareProcess(options, tmp_path / "logs")
    process.launch()
    try:
        await process.wait_ready()
        yield process
    finally:
        await process.stop()
