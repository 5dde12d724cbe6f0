"""The benchmark verdict from its evidence rows, and the search plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from courier.analysis import benchmark, benchmark_plot, plots, tables


def interaction(run_id: str, number: int, ok: bool | None, **values: Any) -> dict[str, Any]:
    row = dict.fromkeys(benchmark.INTERACTION_COLUMNS)
    delivered = 0 if ok is None else 100
    row.update(run_id=run_id, base=1, interaction=number, name=f"i{number}", ok=ok,
               delivered=delivered, late_backlog=0, p90_ms=40.0 * number,
               on_time_share=None if ok is None else (1.0 if ok else 0.5))  # fmt: skip
    row.update(values)
    return row


def queue(run_id: str, name: str, stable: bool | None) -> dict[str, Any]:
    row = dict.fromkeys(benchmark.QUEUE_COLUMNS)
    row.update(run_id=run_id, queue=name, stable=stable, slope_per_s=4.0, slope_low=3.5,
               slope_high=4.5, p_growing=1e-9, growth=120.0)  # fmt: skip
    return row


def test_every_interaction_on_time_and_every_queue_stable_is_valid() -> None:
    rows = [interaction("r0", n, True) for n in range(1, 8)]
    verdict = benchmark.verdict_of("r0", 1, rows, [queue("r0", "a.b", True)])
    assert verdict.valid is True and verdict.failing == []


def test_a_late_interaction_and_a_growing_queue_are_named() -> None:
    rows = [interaction("r0", n, n != 5) for n in range(1, 8)]
    verdict = benchmark.verdict_of("r0", 2, rows, [queue("r0", "hq-000.statInfoSM", False)])
    assert verdict.valid is False
    assert verdict.failing[0].startswith("interaction 5 (i5): 50.0% within 5 s")
    assert verdict.failing[1].startswith("queue hq-000.statInfoSM: backlog grows 4.00 msg/s")


def test_an_interaction_without_messages_leaves_the_run_undecided() -> None:
    rows = [interaction("r0", n, None if n == 4 else True) for n in range(1, 8)]
    verdict = benchmark.verdict_of("r0", 1, rows, [queue("r0", "a.b", True)])
    assert verdict.valid is None and "undecided" in verdict.failing[0]


def test_the_search_plot_has_a_line_per_interaction(tmp_path: Path) -> None:
    rows = [interaction(f"r{b}", n, b < 4, base=b) for b in (1, 2, 4) for n in range(1, 8)]
    table = tables.from_records("interactions", "", rows, benchmark.INTERACTION_COLUMNS)
    verdicts = {f"r{b}": benchmark.Verdict(f"r{b}", b, b < 4, []) for b in (1, 2, 4)}
    figure = benchmark_plot.search_figure(table, verdicts, 2, "search")
    axes = figure.axes[0]
    assert len(axes.get_lines()) == 7 + 1 + 1 + 1  # interactions, bound, invalid, metric
    assert [line.get_xdata().tolist() for line in axes.get_lines()[:1]] == [[1, 2, 4]]
    png, svg = plots.save(figure, tmp_path, "search")
    assert png.stat().st_size > 0 and svg.stat().st_size > 0
