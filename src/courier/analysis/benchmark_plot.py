"""The benchmark search at a glance: p90 delivery time per interaction against BASE."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from matplotlib import ticker
from matplotlib.figure import Figure

from courier.analysis import benchmark, delivery, tables

INVALID_COLOUR = "#d62728"


def search_figure(
    interactions: tables.Table,
    verdicts: Mapping[str, benchmark.Verdict],
    metric: int | None,
    title: str,
) -> Figure:
    """One line per interaction (log scale), the 5 s bound dashed, invalid runs marked."""
    figure = Figure(figsize=(8, 4.5), layout="constrained")
    ax = figure.subplots()
    lines: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for row in interactions.records():
        if row["p90_ms"] is not None:
            lines[f"{row['interaction']} {row['name']}"].append((row["base"], row["p90_ms"]))
    for name, points in sorted(lines.items()):
        points.sort()
        ax.plot([b for b, _ in points], [p for _, p in points], marker="o", label=name)
    ax.axhline(delivery.DEADLINE_MS, color="0.3", linestyle="--", label="5 s bound")
    invalid = sorted({v.base for v in verdicts.values() if not v.valid})
    for base in invalid:
        ax.axvline(base, color=INVALID_COLOUR, alpha=0.25, linewidth=6)
    if metric is not None:
        ax.axvline(metric, color="black", linestyle=":", label=f"metric: BASE {metric}")
    ax.set_yscale("log")
    ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
    ax.set_xlabel("BASE (red: invalid runs)")
    ax.set_ylabel("p90 delivery time (ms)")
    ax.set_title(title)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return figure
