"""How a benchmark tells a person what it is doing, phase by phase (the CLI draws bars)."""

from __future__ import annotations

from typing import Protocol


class Phases(Protocol):
    def phase(self, description: str, total: float | None, unit: str) -> None:
        """A new phase of ``total`` units of work (None: its end is not known)."""
        ...

    def advance(self, completed: float) -> None:
        """How many units of the current phase are done."""
        ...

    def note(self, text: str) -> None: ...
