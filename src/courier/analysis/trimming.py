"""Where each run's measured interval begins and ends.

By default a run keeps ``[start + warmup_s, end - cooldown_s)`` as its manifest
marks it. A fixed trim ``START_S:END_S`` overrides that for every run: it keeps
the seconds from START_S to END_S after the run's start, Python-slice style, so
``5:55`` keeps seconds 5 to 55, ``5:-5`` cuts five seconds at each end and ``5:``
keeps everything after the fifth second.
"""

from __future__ import annotations

from dataclasses import dataclass

from courier.analysis import errors
from courier.measurements import manifest as manifest_

NS_PER_S = 1_000_000_000


@dataclass(frozen=True, slots=True)
class FixedTrim:
    """Keep ``[start_s, end_s)`` seconds after each run's start; None = to the end."""

    start_s: float
    end_s: float | None = None

    def __str__(self) -> str:
        end = "" if self.end_s is None else f"{self.end_s:g}"
        return f"{self.start_s:g}:{end}"


@dataclass(frozen=True, slots=True)
class Bounds:
    """A run's whole extent and its measured interval, as wall-clock nanoseconds."""

    run_id: str
    start_ns: int
    end_ns: int
    keep_from_ns: int
    keep_until_ns: int

    @property
    def duration_s(self) -> float:
        return (self.end_ns - self.start_ns) / NS_PER_S

    @property
    def measured_s(self) -> float:
        return (self.keep_until_ns - self.keep_from_ns) / NS_PER_S

    @property
    def cut_start_s(self) -> float:
        return (self.keep_from_ns - self.start_ns) / NS_PER_S

    @property
    def cut_end_s(self) -> float:
        return (self.keep_until_ns - self.start_ns) / NS_PER_S


def parse(text: str) -> FixedTrim:
    """Parse ``START_S:END_S`` (END_S may be empty or negative)."""
    start, colon, end = text.partition(":")
    try:
        start_s = float(start)
        end_s = float(end) if end.strip() else None
    except ValueError:
        raise errors.InvalidTrim(f"trim {text!r} is not START_S:END_S") from None
    if not colon or start_s < 0 or (end_s is not None and 0 <= end_s <= start_s):
        raise errors.InvalidTrim(f"trim {text!r}: {errors.InvalidTrim.default_message()}")
    return FixedTrim(start_s, end_s)


def bounds_for(run: manifest_.Run, start_ns: int, end_ns: int, trim: FixedTrim | None) -> Bounds:
    """The measured interval of one run whose extent is ``[start_ns, end_ns)``."""
    if trim is None:
        keep_from = start_ns + round(run.warmup_s * NS_PER_S)
        keep_until = end_ns - round(run.cooldown_s * NS_PER_S)
    else:
        keep_from = start_ns + round(trim.start_s * NS_PER_S)
        keep_until = _fixed_end(trim, start_ns, end_ns)
    keep_from, keep_until = max(keep_from, start_ns), min(keep_until, end_ns)
    if keep_from >= keep_until:
        how = f"trim {trim}" if trim else "its warm-up and cool-down"
        raise errors.InvalidTrim(f"run {run.run_id}: {how} leaves no measured interval")
    return Bounds(run.run_id, start_ns, end_ns, keep_from, keep_until)


def _fixed_end(trim: FixedTrim, start_ns: int, end_ns: int) -> int:
    if trim.end_s is None:
        return end_ns
    if trim.end_s < 0:
        return end_ns + round(trim.end_s * NS_PER_S)
    return start_ns + round(trim.end_s * NS_PER_S)
