"""The collector settings of Courier's serving processes."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from courier import gctuning


@pytest.fixture
def restored_collector() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_serving_processes_collect_rarely_and_skip_their_start_up_objects(
    restored_collector: None,
) -> None:
    start_up_state = {"lives": ["for good"]}  # a tracked container, as start-up state is

    gctuning.tune_for_serving()

    assert gc.get_threshold() == gctuning.THRESHOLDS
    assert gctuning.THRESHOLDS[0] > 700  # far rarer than CPython's default
    assert gc.get_freeze_count() > 0
    collected = [o for generation in (0, 1, 2) for o in gc.get_objects(generation)]
    assert not any(o is start_up_state for o in collected)  # frozen: no collection walks it
    made_later: list[object] = []
    assert any(o is made_later for o in gc.get_objects(0))  # later objects are collected
