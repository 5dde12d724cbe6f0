"""Measured intervals from the manifest's marks or from a fixed --trim."""

from __future__ import annotations

import pytest

from courier.analysis import errors, trimming
from courier.measurements import manifest

S = 1_000_000_000
RUN = manifest.Run("r0", {}, warmup_s=5, cooldown_s=2.5)


def test_manifest_marks_cut_warmup_and_cooldown() -> None:
    bounds = trimming.bounds_for(RUN, 100 * S, 160 * S, None)
    assert (bounds.keep_from_ns, bounds.keep_until_ns) == (105 * S, 157_500_000_000)
    assert (bounds.cut_start_s, bounds.cut_end_s, bounds.measured_s) == (5.0, 57.5, 52.5)


@pytest.mark.parametrize(
    ("text", "keep"),
    [
        ("10:50", (10, 50)),  # seconds 10 to 50 after the start
        ("10:-5", (10, 55)),  # five seconds off the end
        ("10:", (10, 60)),  # to the end
        ("0:100", (0, 60)),  # clipped to the run
    ],
)
def test_fixed_trim_overrides_the_manifest(text: str, keep: tuple[int, int]) -> None:
    bounds = trimming.bounds_for(RUN, 100 * S, 160 * S, trimming.parse(text))
    assert (bounds.cut_start_s, bounds.cut_end_s) == keep


@pytest.mark.parametrize("text", ["", "5", "a:b", "-1:5", "10:10", "10:4"])
def test_bad_trims_are_rejected(text: str) -> None:
    with pytest.raises(errors.InvalidTrim):
        trimming.parse(text)


def test_a_trim_that_leaves_nothing_is_an_error_naming_the_run() -> None:
    with pytest.raises(errors.InvalidTrim, match="r0"):
        trimming.bounds_for(RUN, 0, 10 * S, trimming.parse("20:"))
    with pytest.raises(errors.InvalidTrim, match="r0"):
        trimming.bounds_for(RUN, 0, 7 * S, None)  # 5 s warm-up + 2.5 s cool-down > 7 s
