"""Reading a run directory's records in tests, and small specs for short runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from courier.lab import spec
from courier.measurements import record_schema


def read_kind(run_dir: Path, kind: str) -> list[dict[str, Any]]:
    """Every finished record of one kind in a run directory."""
    paths = sorted(path for path in (run_dir / kind).glob("*.parquet"))
    if not paths:
        return []
    tables = [pq.read_table(path) for path in paths]
    for table in tables:
        assert table.schema == record_schema.arrow_schema(kind)
    return pa.concat_tables(tables).to_pylist()


def quick_spec(
    name: str, *, factors: dict[str, list[Any]] | None = None, **values: Any
) -> spec.ExperimentSpec:
    """A spec for a run of a few seconds; ``values`` are parameters."""
    parameters = {
        "middleware": 1,
        "pool_size": 4,
        "client_processes": 1,
        "mix": {"standard": 4},
        "duration_s": 3.0,
        "warmup_s": 0.5,
        "cooldown_s": 0.5,
        **values,
    }
    raw: dict[str, Any] = {"name": name, "factors": factors or {}}
    for key, value in parameters.items():
        raw.setdefault(spec.SECTION_OF.get(key, "workload"), {})[key] = value
    raw["system"]["durable"] = False
    return spec.parse(raw)
