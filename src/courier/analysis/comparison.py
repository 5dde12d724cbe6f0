"""`courier analyze --compare A B`: two experiments side by side, B against A.

Both are analysed (each gets its own report), then compared per configuration
(runs pooled by their factor levels; when the two share no configuration, all runs
of each are pooled as one). For each metric the table shows A, B, the difference
B - A and whether it is significant at 95%:

- throughput (per-second samples) and mean response time (requests): Welch's
  t-test from the pooled moments (``scipy.stats.ttest_ind_from_stats``);
- p99 response time (mean of the runs' p99): the difference only, no test;
- delivery-time p50 and p90 (the runs' histograms merged): significant when the
  two 95% order-statistic intervals do not overlap (a conservative test).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scipy import stats as sp_stats

from courier.analysis import content, histograms, pipeline, report, stats, tables
from courier.analysis.results import Results

COLUMNS = (
    "config", "metric", "a", "b", "difference", "change_percent", "test", "p_value",
    "significant",
)  # fmt: skip
POOLED = "all runs"


@dataclass(frozen=True)
class Comparison:
    table: tables.Table
    report_dir: Path


def compare(a: pipeline.Summary, b: pipeline.Summary, out: Path) -> Comparison:
    """Compare two analysed experiments and write ``out``/index.html and report.md."""
    assert a.results is not None and b.results is not None
    groups_a, groups_b = _groups(a.results), _groups(b.results)
    shared = [config for config in groups_a if config in groups_b]
    if not shared:
        groups_a, groups_b = _pooled(a.results), _pooled(b.results)
        shared = [POOLED]
    rows = [
        row
        for config in shared
        for row in _rows(config, a.results, groups_a[config], b.results, groups_b[config])
    ]
    title = f"{b.experiment} (B) against {a.experiment} (A)"
    table = tables.from_records(
        "comparison",
        title,
        rows,
        COLUMNS,
        note="difference = B - A. Throughput and mean response time: Welch's t-test; "
        "delivery percentiles: significant when the 95% intervals do not "
        "overlap; p99 response time: no test.",
    )
    _write(table, a, b, out)
    return Comparison(table, out)


def _groups(results: Results) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for run_id, config in results.inputs.configs.items():
        found.setdefault(config, []).append(run_id)
    return found


def _pooled(results: Results) -> dict[str, list[str]]:
    return {POOLED: list(results.inputs.configs)}


def _rows(
    config: str, a: Results, runs_a: list[str], b: Results, runs_b: list[str]
) -> list[dict[str, Any]]:
    rows = [
        _welch(config, "throughput (req/s)", _pool(a.runs.throughput, runs_a),
               _pool(b.runs.throughput, runs_b)),
        _welch(config, "mean response time (ms)", _pool(a.runs.response, runs_a),
               _pool(b.runs.response, runs_b)),
        _plain(config, "p99 response time (ms)", _mean_p99(a, runs_a), _mean_p99(b, runs_b)),
    ]  # fmt: skip
    histogram_a, histogram_b = _histogram(a, runs_a), _histogram(b, runs_b)
    for name, p in (("p50", 0.5), ("p90", 0.9)):
        rows.append(_overlap(config, f"delivery {name} (ms)", histogram_a, histogram_b, p))
    return rows


def _pool(moments: dict[str, stats.Moments], run_ids: Iterable[str]) -> stats.Moments | None:
    return stats.pool(moments[r] for r in run_ids if r in moments)


def _mean_p99(results: Results, run_ids: list[str]) -> float | None:
    values = [r["p99"] for r in results.runs.table.records() if r["run_id"] in run_ids]
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def _histogram(results: Results, run_ids: list[str]) -> histograms.Histogram:
    cells = [c for r in run_ids for c in results.delivery.histograms.get(r, [])]
    return histograms.Histogram.of(cells)


def _row(config: str, metric: str, a: float | None, b: float | None) -> dict[str, Any]:
    difference = None if a is None or b is None else b - a
    change = None if difference is None or not a else 100 * difference / a
    return {"config": config, "metric": metric, "a": a, "b": b, "difference": difference,
            "change_percent": change, "test": "", "p_value": None,
            "significant": None}  # fmt: skip


def _welch(
    config: str, metric: str, a: stats.Moments | None, b: stats.Moments | None
) -> dict[str, Any]:
    row = _row(config, metric, a.mean if a else None, b.mean if b else None)
    if a is None or b is None or a.n < 2 or b.n < 2:
        return row
    test = sp_stats.ttest_ind_from_stats(a.mean, a.std, a.n, b.mean, b.std, b.n, equal_var=False)
    row["test"], row["p_value"] = "Welch t", float(test.pvalue)
    row["significant"] = row["p_value"] < 1 - stats.CONFIDENCE
    return row


def _plain(config: str, metric: str, a: float | None, b: float | None) -> dict[str, Any]:
    row = _row(config, metric, a, b)
    row["test"] = "none"
    return row


def _overlap(
    config: str, metric: str, a: histograms.Histogram, b: histograms.Histogram, p: float
) -> dict[str, Any]:
    if not a.n or not b.n:
        return _plain(config, metric, None, None)
    value_a, low_a, high_a = a.quantile(p)
    value_b, low_b, high_b = b.quantile(p)
    row = _row(config, metric, value_a, value_b)
    row["test"] = f"95% intervals [{low_a:.4g}, {high_a:.4g}] and [{low_b:.4g}, {high_b:.4g}]"
    row["significant"] = high_a < low_b or high_b < low_a
    return row


def _write(table: tables.Table, a: pipeline.Summary, b: pipeline.Summary, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    writer = content.Writer(out)
    section = report.Section(
        "comparison",
        "Comparison",
        [
            report.Paragraph(f"A: {a.experiment}, report in {a.report_dir}."),
            report.Paragraph(f"B: {b.experiment}, report in {b.report_dir}."),
            writer.table(table),
        ],
    )
    writer.finish()
    document = report.Document(f"Courier comparison: {table.title}", [section])
    (out / "report.md").write_text(report.render_markdown(document), encoding="utf-8")
    (out / "index.html").write_text(report.render_html(document), encoding="utf-8")
