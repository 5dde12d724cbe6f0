"""Where response time goes: the component breakdown per operation.

A request's client and server records are matched on (run_id, client_id,
request_id); requests without a server record (e.g. lost connections, or a run
without server records) are left out and counted. Means are taken over the
measured, non-error requests and pooled over the runs of one configuration. The
field sums they come from are ``component_sums``'s.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from courier.analysis import component_sums, tables, transforms

COMPONENTS = (
    "queued",
    "pool_wait",
    "db_exec",
    "db_rest",
    "server_other",
    "serialization",
    "network",
)
COMPONENT_COLUMNS = tuple(f"{name}_ms" for name in COMPONENTS)
COLUMNS = ("config", "operation", "requests", "response_ms", *COMPONENT_COLUMNS)


def component_ns(parts: Mapping[str, float]) -> dict[str, float]:
    """The components of (a sum of) requests from their fields' (sums), in ns.

    They add up to the client's response time: network is the client's response
    time minus the server's total time, less the client's own encoding and decoding
    (which count as serialization, with the server's).
    """
    accounted = (
        parts["queued_ns"]
        + parts["pool_wait_ns"]
        + parts["db_round_trip_ns"]
        + parts["server_codec_ns"]
    )
    found = {
        "queued": parts["queued_ns"],
        "pool_wait": parts["pool_wait_ns"],
        "db_exec": parts["db_exec_ns"],
        "db_rest": parts["db_round_trip_ns"] - parts["db_exec_ns"],
        "server_other": parts["total_ns"] - accounted,
        "serialization": parts["client_codec_ns"] + parts["server_codec_ns"],
        "network": parts["response_ns"] - parts["total_ns"] - parts["client_codec_ns"],
    }
    return {name: found[name] for name in COMPONENTS}


def pool_by_config(sums: component_sums.Sums, configs: Mapping[str, str]) -> tables.Table:
    """Mean components per configuration and operation, over the runs' requests."""
    pooled_sums: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for (run_id, operation), cell in sums.items():
        target = pooled_sums[(configs[run_id], operation)]
        for name, value in cell.items():
            target[name] += value
    pooled = []
    for (config, operation), cell in sorted(pooled_sums.items()):
        n = cell["requests"]
        if not n:
            continue
        parts = {name: cell[name] / n for name in component_sums.PARTS}
        means = {
            f"{name}_ms": value / transforms.NS_PER_MS
            for name, value in component_ns(parts).items()
        }
        response = parts["response_ns"] / transforms.NS_PER_MS
        pooled.append(
            {"config": config, "operation": operation, "requests": n,
             "response_ms": response, **means}
        )  # fmt: skip
    return tables.from_records(
        "components",
        "Mean response time components per operation (ms)",
        pooled,
        COLUMNS,
        note="Components add up to the response time; network excludes the client's "
        "own encoding and decoding, which count as serialization.",
    )
