"""`courier bench flat` runs a later level in turns with the reference, on fake peers
that log every call: which peer ran, in what order, and what the progress bar saw."""

from __future__ import annotations

from courier.bench import flat


class LoggingPeer:
    """A peer whose sends and pops always succeed, each logged under its name."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log

    async def send(self) -> int:
        self.log.append(self.name)
        return 1

    async def pop(self) -> int:
        return 1


class LoggingPhases:
    def __init__(self) -> None:
        self.phases: list[tuple[str, float | None]] = []
        self.advances: list[float] = []

    def phase(self, description: str, total: float | None, unit: str) -> None:
        self.phases.append((description, total))
        self.advances = []

    def advance(self, completed: float) -> None:
        self.advances.append(completed)

    def note(self, text: str) -> None:
        pass


def prepared(background: int, peer: LoggingPeer) -> flat._Prepared:
    return flat._Prepared(background, background, 0.0, 0.0, 0, peer)


def runs(log: list[str]) -> list[tuple[str, int]]:
    """The log as (peer, cycles in a row)."""
    found: list[tuple[str, int]] = []
    for name in log:
        if found and found[-1][0] == name:
            found[-1] = (name, found[-1][1] + 1)
        else:
            found.append((name, 1))
    return found


async def test_the_level_and_the_reference_take_turns_after_the_reference_warms_up() -> None:
    log: list[str] = []
    phases = LoggingPhases()
    level = await flat._in_turns(
        prepared(1000, LoggingPeer("loaded", log)),
        prepared(0, LoggingPeer("reference", log)),
        250,
        phases,
    )

    assert runs(log) == [
        ("reference", flat.WARMUP_CYCLES),
        ("loaded", 100), ("reference", 200), ("loaded", 150), ("reference", 50),
    ]  # fmt: skip
    assert [total for _, total in phases.phases] == [flat.WARMUP_CYCLES, 500]
    assert phases.advances == [200, 400, 500]
    assert level.samples == 250 and level.background == 1000
    assert level.alongside is not None and level.alongside.empty_pops == 0


async def test_pops_that_find_nothing_are_counted_on_the_side_that_ran_them() -> None:
    log: list[str] = []

    class EmptyPeer(LoggingPeer):
        async def pop(self) -> int:
            return 0

    level = await flat._in_turns(
        prepared(1000, LoggingPeer("loaded", log)),
        prepared(0, EmptyPeer("reference", log)),
        30,
        LoggingPhases(),
    )

    assert level.empty_pops == 0
    assert level.alongside is not None and level.alongside.empty_pops == 30
