"""The report's first screen: how fast, how variable, what mattered, was it valid.

One row per run with the figures a reader looks for first (throughput with its
interval, response-time and delivery-time percentiles, the validity verdict), and
sentences naming the factors that explain the most variation.
"""

from __future__ import annotations

from typing import Any

from courier.analysis import factorial, tables
from courier.analysis.results import Results

TOP_FACTORS = 3
COLUMNS = (
    "run",
    "config",
    "throughput (req/s) [95% CI]",
    "response p50 / p90 / p99 (ms)",
    "delivery p50 / p90 (ms) [95% CI]",
    "valid",
)


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _interval(low: float | None, high: float | None) -> str:
    return "" if low is None or high is None else f" [{_number(low)}, {_number(high)}]"


def _verdict(row: dict[str, Any]) -> str:
    if not row["judged"]:
        return "n/a (closed loop)"
    return {True: "yes", False: "NO", None: "?"}[row["valid"]]


def headline(results: Results) -> tables.Table:
    """One row per run: the numbers that answer 'how fast, how variable, valid?'."""
    verdicts = {row["run_id"]: row for row in results.validity.records()}
    delivered = results.delivery.runs
    rows = []
    for run in results.runs.table.records():
        run_id = run["run_id"]
        late = delivered.get(run_id, {})
        rows.append(
            {
                "run": run_id,
                "config": run["config"],
                "throughput (req/s) [95% CI]": _number(run["throughput"])
                + _interval(run["throughput_ci_low"], run["throughput_ci_high"]),
                "response p50 / p90 / p99 (ms)": " / ".join(
                    _number(run[p]) for p in ("p50", "p90", "p99")
                ),
                "delivery p50 / p90 (ms) [95% CI]": _delivery_text(late),
                "valid": _verdict(verdicts[run_id]),
            }
        )
    return tables.from_records(
        "headline",
        "Summary of each run",
        rows,
        COLUMNS,
        note="Response time: client-side, call start to decoded reply. Delivery time: "
        "send start to the reply of the read that took the message. Valid: the "
        "saturation verdict (open-loop runs only).",
    )


def _delivery_text(row: dict[str, Any]) -> str:
    if not row.get("n"):
        return "no messages"
    return (
        f"{_number(row['p50'])}{_interval(row['p50_low'], row['p50_high'])} / "
        f"{_number(row['p90'])}{_interval(row['p90_low'], row['p90_high'])}"
    )


def top_factors(results: Results) -> list[str]:
    """A sentence per factorial analysis naming its largest terms, or why there is none."""
    analyses = results.factors.analyses
    if not analyses:
        return [results.factors.note or "The experiment varies no factor."]
    return [_top_sentence(analysis) for analysis in analyses]


def _top_sentence(analysis: factorial.Result) -> str:
    ranked = sorted(
        (e for e in analysis.effects if e.variation is not None),
        key=lambda e: e.variation or 0.0,
        reverse=True,
    )[:TOP_FACTORS]
    parts = []
    for effect in ranked:
        share = f"{100 * (effect.variation or 0.0):.1f}%"
        interval = _interval(effect.ci_low, effect.ci_high)
        significant = {True: "significant", False: "not significant", None: "no interval"}
        parts.append(
            f"{effect.label} {share} (effect {effect.estimate:+.4g}{interval}, "
            f"{significant[effect.significant]})"
        )
    return f"What mattered for {analysis.response}: " + "; ".join(parts) + "."


def validity_sentence(results: Results) -> str:
    rows = [row for row in results.validity.records() if row["judged"]]
    if not rows:
        return "Validity: no run is open-loop, so the saturation verdict does not apply."
    valid = [row["run_id"] for row in rows if row["valid"]]
    invalid = [row["run_id"] for row in rows if row["valid"] is False]
    text = f"Validity: {len(valid)} of {len(rows)} saturation runs valid"
    if invalid:
        text += f"; not valid: {', '.join(invalid)}"
    return text + " (90% of messages delivered within 5 s and a stable queue depth)."
