"""Putting middleware on other hosts onto the runner's timeline (`courier lab align`).

At the start of each run the runner measures every middleware's clock offset
(its clock minus the runner's) with PING round trips and stores it in the
manifest as ``clock_offsets[instance] = {offset_ns, uncertainty_ns, applied_ns}``.
On one host every process reads the same clock, so nothing is applied. When
middleware ran elsewhere and its record files have been copied into the run
directories, ``align_experiment`` subtracts each significant offset (larger than
its uncertainty) from that instance's instants, once, and records it as
``applied_ns`` in the manifest.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from courier.measurements import manifest, record_schema

# kind -> (column naming the process, instant column)
INSTANTS = {
    record_schema.SERVER_REQUESTS: ("instance", "receive_ns"),
    record_schema.RESOURCES: ("process", "ts_ns"),
    record_schema.GC_PAUSES: ("process", "ts_ns"),
}


def significant(offset: dict[str, int]) -> bool:
    return abs(offset["offset_ns"]) > offset["uncertainty_ns"]


def align_experiment(experiment_dir: Path) -> dict[str, dict[str, int]]:
    """Apply every significant, not yet applied offset; returns {run_id: {instance: ns}}."""
    experiment = manifest.load(experiment_dir)
    applied: dict[str, dict[str, int]] = {}
    for run in experiment.runs:
        for instance, offset in run.clock_offsets.items():
            if offset.get("applied_ns") or not significant(offset):
                continue
            shift_instants(experiment_dir / run.run_id, instance, offset["offset_ns"])
            offset["applied_ns"] = offset["offset_ns"]
            applied.setdefault(run.run_id, {})[instance] = offset["offset_ns"]
    if applied:
        experiment.write()
    return applied


def shift_instants(run_dir: Path, process: str, offset_ns: int) -> int:
    """Subtract offset_ns from the instants of one process's rows; returns rows changed."""
    changed = 0
    for kind, (name_column, instant_column) in INSTANTS.items():
        for file in sorted((run_dir / kind).glob("*.parquet")):
            table = pq.read_table(file)
            mine = pc.equal(table.column(name_column), pa.scalar(process))
            count = mine.to_pylist().count(True)
            if not count:
                continue
            instants = table.column(instant_column)
            shifted = pc.if_else(mine, pc.subtract(instants, pa.scalar(offset_ns)), instants)
            index = table.schema.get_field_index(instant_column)
            table = table.set_column(index, table.schema.field(index), shifted)
            _write_table(file, table)
            changed += count
    return changed


def _write_table(path: Path, table: pa.Table) -> None:
    partial = path.with_name(f".{path.name}.partial")
    pq.write_table(table, partial, compression="zstd")
    os.replace(partial, path)
