"""Is a saturation run valid? Two criteria, both at 95% confidence where tested.

1. Delivery time: at least 90% of the messages sent in the measured interval were
   delivered within 5 s (``courier.analysis.delivery``). A message still waiting at
   the end of the run counts against it once it has waited 5 s; one that had waited
   less cannot be judged and is left out.
2. Queue depth is stable: the least-squares slope of the total queue depth over
   the measured interval is not significantly different from zero (t-test).

A run without queue-depth samples gets no stability verdict (and so no overall one).

Only saturation runs are judged: open-loop runs, whose clients start requests at
Poisson arrivals however slowly the replies come (``arrival = "open"``). In a
closed loop the offered load follows the system's speed, so a growing queue or a
slow p90 says how the workload is built, not whether the system keeps up; such
runs get their measurements but no verdict ("n/a").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from courier.analysis import delivery, stats, tables

MAX_P90_MS = delivery.DEADLINE_MS
SHARE = 0.9
METHOD = (
    "Delivery time is measured per message: each send joined to the read that took it. "
    "on_time_share counts messages sent in the measured interval and delivered within "
    "5 s, over those delivered plus those still waiting at the end after 5 s or more "
    "(a message waiting less at the end cannot be judged). p90_ok: on_time_share >= 0.9."
)
SCOPE = (
    "Only saturation runs are judged: open-loop runs, whose clients start requests at "
    'Poisson arrivals at a fixed rate (arrival = "open", as in experiments/saturation.toml). '
    "In a closed loop each client waits for its reply before the next request, so the "
    "offered load follows the system's speed and the criteria do not apply: those runs "
    "show their measurements with n/a as verdict."
)
COLUMNS = (
    "run_id",
    "config",
    "arrival",
    "judged",
    "delivered",
    "late_backlog",
    "p90_delivery_ms",
    "on_time_share",
    "p90_ok",
    "depth_samples",
    "depth_slope_per_s",
    "slope_ci_low",
    "slope_ci_high",
    "slope_p_value",
    "depth_stable",
    "valid",
)


def verdict(
    run_id: str,
    config: str,
    arrival: str,
    delivered: Mapping[str, Any],
    depth: stats.SlopeTest | None,
) -> dict[str, Any]:
    """The validity row of one run; only an open-loop run gets verdicts."""
    judged = arrival == "open"
    share = on_time_share(delivered)
    p90_ok = None if share is None or not judged else share >= SHARE
    stable = None if depth is None or not judged else not depth.significant
    valid = None if p90_ok is None or stable is None else p90_ok and stable
    return {
        "run_id": run_id,
        "config": config,
        "arrival": arrival,
        "judged": judged,
        "delivered": delivered.get("delivered") or 0,
        "late_backlog": delivered.get("late_backlog") or 0,
        "p90_delivery_ms": delivered.get("p90"),
        "on_time_share": share,
        "p90_ok": p90_ok,
        "depth_samples": depth.n if depth else 0,
        "depth_slope_per_s": depth.slope if depth else None,
        "slope_ci_low": depth.ci_low if depth else None,
        "slope_ci_high": depth.ci_high if depth else None,
        "slope_p_value": depth.p_value if depth else None,
        "depth_stable": stable,
        "valid": valid,
    }


def on_time_share(delivered: Mapping[str, Any]) -> float | None:
    """The share of messages delivered within 5 s, of those whose fate is known."""
    count = delivered.get("delivered") or 0
    on_time = round((delivered.get("within_5s") or 0.0) * count)
    known = count + (delivered.get("late_backlog") or 0)
    return on_time / known if known else None


def table(
    configs: Mapping[str, str],
    arrivals: Mapping[str, str],
    delivered: Mapping[str, Mapping[str, Any]],
    depth_rows: Mapping[str, Mapping[str, Any]],
) -> tables.Table:
    """Verdicts of every run, in run order; runs not judged show n/a."""
    rows = []
    for run_id, config in configs.items():
        depth_row = depth_rows.get(run_id)
        depth = stats.slope_test(depth_row) if depth_row else None
        rows.append(verdict(run_id, config, arrivals[run_id], delivered.get(run_id, {}), depth))
    return tables.from_records(
        "validity", "Validity of saturation runs", rows, COLUMNS, note=METHOD, applies="judged"
    )


def judged_runs(validity: tables.Table) -> list[str]:
    """The run ids the verdict applies to."""
    return [row["run_id"] for row in validity.records() if row["judged"]]
