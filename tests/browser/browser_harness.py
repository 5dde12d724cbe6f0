"""Types shared by the browser tests."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from playwright.async_api import Page

Screenshot = Callable[[Page, str], Awaitable[Path]]
"""``await screenshot(page, "name")`` saves test-artifacts/screenshots/name.png."""
