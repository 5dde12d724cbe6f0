"""The machine's pace probe: CPU time of a fixed Python loop."""

from __future__ import annotations

import pytest

from courier.lab import host


def test_the_pace_is_the_cpu_time_of_the_loop_in_milliseconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ticks = iter([10.0, 10.25, 20.0, 20.2, 30.0, 30.3])  # three tries: 250, 200, 300 ms
    monkeypatch.setattr(host.time, "process_time", lambda: next(ticks))
    monkeypatch.setattr(host, "PACE_LOOP", 10)
    assert host.pace_ms() == 200.0  # the least of the three


def test_a_real_probe_takes_a_positive_time() -> None:
    assert host.pace_ms(tries=1) > 0
