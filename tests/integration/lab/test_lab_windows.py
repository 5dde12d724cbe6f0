"""A load process told several windows drives its clients in each and rests between."""

from __future__ import annotations

import time
from pathlib import Path

from lab_helpers import read_kind

from courier.lab import loadgen
from courier.measurements import record_schema
from courier.server import launcher
from helpers.load import load_plan

SECOND_NS = 1_000_000_000
WINDOW_S = 0.6
GAP_S = 1.0
SLACK_NS = SECOND_NS // 10  # timer jitter, and a ping that passed the check at the end


async def test_clients_drive_inside_each_window_and_rest_between(
    middleware: launcher.Middleware, tmp_path: Path
) -> None:
    plan = await load_plan(middleware.address, tmp_path, {"ping": 2})
    windows: list[loadgen.Window] = []

    async def go_soon() -> loadgen.Go:
        first = time.time_ns() + SECOND_NS // 5
        second = first + int((WINDOW_S + GAP_S) * SECOND_NS)
        windows.extend([loadgen.Window(first, WINDOW_S), loadgen.Window(second, WINDOW_S)])
        return loadgen.Go(first, WINDOW_S, later=(windows[1],))

    result = await loadgen.run_process(plan, go_soon)

    assert result.errors == 0
    assert len(result.window_iterations) == 2 and min(result.window_iterations) > 0
    assert sum(result.window_iterations) == result.iterations
    # Busy from each window's start until its last iteration ended: a little longer.
    assert all(WINDOW_S <= busy < WINDOW_S + GAP_S for busy in result.window_busy_s)
    pings = [
        row["start_ns"]
        for row in read_kind(tmp_path, record_schema.CLIENT_REQUESTS)
        if row["operation"] == "ping"
    ]
    assert len(pings) == result.iterations  # one ping per iteration, each recorded
    # Pings start only inside a window: none in the second between them.
    in_window = [next((n for n, w in enumerate(windows) if _within(at, w)), None) for at in pings]
    assert None not in in_window
    assert [in_window.count(n) for n in range(2)] == result.window_iterations


def _within(instant_ns: int, window: loadgen.Window) -> bool:
    end_ns = window.start_ns + int(window.duration_s * SECOND_NS)
    return window.start_ns - SLACK_NS <= instant_ns < end_ns + SLACK_NS
