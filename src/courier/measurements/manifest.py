"""``<experiment>/manifest.json``: what ran, with which levels, when, on what.

One schema for every side: the lab runner writes a ``Manifest`` (again after every
run, so an interrupted experiment still lists the runs that finished), so do the
generated experiments (``courier.analysis.synthetic``), and the analysis reads it
back with ``load``. On disk:

    {"name", "spec": {...}, "factors": {factor: [levels...]},
     "runs": [{"run_id", "levels", "replication", "warmup_s", "cooldown_s",
               "start_ns", "end_ns", "clock_offsets": {...}}],
     "git_revision", "packages": {...}, "machine": {...}}

Reading checks it. Only ``name``, ``factors`` and ``runs`` (each with ``run_id``)
are required; ``warmup_s`` and ``cooldown_s`` default to 0, and a run without
``start_ns``/``end_ns`` takes its extent from its client records.

A run's ``arrival`` is its ``arrival`` factor level, else the spec's
``[workload] arrival``, else ``"closed"`` (the lab's default). Open-loop runs
(Poisson arrivals at a fixed rate, as in experiments/saturation.toml) are the
saturation runs that the validity verdict judges.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from courier.analysis import errors

MANIFEST_NAME = "manifest.json"
ARRIVALS = ("closed", "open")


@dataclass(frozen=True, slots=True)
class Run:
    """One run of an experiment: one combination of factor levels, one replication."""

    run_id: str
    levels: dict[str, Any]
    replication: int = 0
    warmup_s: float = 0.0
    cooldown_s: float = 0.0
    start_ns: int | None = None
    end_ns: int | None = None
    clock_offsets: dict[str, Any] = field(default_factory=dict)
    arrival: str = "closed"  # derived when read, never written

    @property
    def open_loop(self) -> bool:
        """Clients start requests at Poisson arrivals, whether or not replies came back."""
        return self.arrival == "open"

    def label(self, factor_names: list[str]) -> str:
        """The factor levels as text, e.g. ``clients=8, instances=2``."""
        parts = [f"{name}={self.levels[name]}" for name in factor_names if name in self.levels]
        return ", ".join(parts) or "all"

    def as_json(self) -> dict[str, Any]:
        stored = dataclasses.asdict(self)
        del stored["arrival"]  # derived from the levels and the spec when read
        return stored


@dataclass(frozen=True, slots=True)
class Manifest:
    """An experiment: its name, factors and runs, and the host it ran on."""

    path: Path
    name: str
    factors: dict[str, list[Any]]
    runs: tuple[Run, ...] = ()
    spec: dict[str, Any] = field(default_factory=dict)
    git_revision: str | None = None
    packages: Any = None
    machine: Any = None

    @property
    def directory(self) -> Path:
        return self.path.parent

    @property
    def factor_names(self) -> list[str]:
        return list(self.factors)

    def run(self, run_id: str) -> Run:
        for run in self.runs:
            if run.run_id == run_id:
                return run
        raise KeyError(run_id)

    def with_run(self, run: Run) -> Manifest:
        return dataclasses.replace(self, runs=(*self.runs, run))

    def write(self) -> None:
        """Write atomically, so a reader never sees half a manifest."""
        document = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        del document["path"]  # where it is, not what it says
        document["runs"] = [run.as_json() for run in self.runs]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(f".{MANIFEST_NAME}.partial")
        partial.write_text(json.dumps(document, indent=2, default=str) + "\n")
        os.replace(partial, self.path)


def path_in(experiment_dir: Path) -> Path:
    return Path(experiment_dir) / MANIFEST_NAME


def load(experiment_dir: Path) -> Manifest:
    """Read and check ``manifest.json``; every problem is a ManifestError naming it."""
    path = path_in(experiment_dir)
    if not path.is_file():
        raise errors.ManifestError(path, "no manifest: is this an experiment directory?")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise errors.ManifestError(path, f"cannot read the manifest: {exc}") from exc
    try:
        return _parse(path, document)
    except (KeyError, TypeError, ValueError) as exc:
        raise errors.ManifestError(path, f"malformed manifest: {_describe(exc)}") from exc


def _parse(path: Path, document: Any) -> Manifest:
    if not isinstance(document, dict):
        raise TypeError("the manifest is not a JSON object")
    factors = _parse_factors(document.get("factors") or {})
    spec = dict(document.get("spec") or {})
    arrival = _spec_arrival(spec)
    runs = tuple(_parse_run(item, factors, arrival) for item in document["runs"])
    if not runs:
        raise ValueError("the manifest lists no runs")
    if len({run.run_id for run in runs}) != len(runs):
        raise ValueError("run ids are not unique")
    return Manifest(
        path=path,
        name=str(document["name"]),
        factors=factors,
        runs=runs,
        spec=spec,
        git_revision=document.get("git_revision"),
        packages=document.get("packages"),
        machine=document.get("machine"),
    )


def _parse_factors(raw: Any) -> dict[str, list[Any]]:
    if not isinstance(raw, dict):
        raise TypeError("'factors' must map factor names to lists of levels")
    factors: dict[str, list[Any]] = {}
    for name, levels in raw.items():
        if not isinstance(levels, list) or not levels:
            raise ValueError(f"factor {name!r} must list its levels")
        factors[str(name)] = levels
    return factors


def _spec_arrival(spec: dict[str, Any]) -> str:
    workload = spec.get("workload")
    arrival = workload.get("arrival", "closed") if isinstance(workload, dict) else "closed"
    if arrival not in ARRIVALS:
        raise ValueError(f"spec: arrival {arrival!r} is not one of {ARRIVALS}")
    return str(arrival)


def _parse_run(item: Any, factors: dict[str, list[Any]], arrival: str) -> Run:
    if not isinstance(item, dict):
        raise TypeError("each run must be a JSON object")
    run_id = str(item["run_id"])
    if not run_id or "/" in run_id or run_id.startswith("."):
        raise ValueError(f"run id {run_id!r} is not a directory name")
    levels = dict(item.get("levels") or {})
    for name, level in levels.items():
        if name not in factors or level not in factors[name]:
            raise ValueError(f"run {run_id}: level {name}={level!r} is not a declared level")
    run_arrival = levels.get("arrival", arrival)
    if run_arrival not in ARRIVALS:
        raise ValueError(f"run {run_id}: arrival {run_arrival!r} is not one of {ARRIVALS}")
    return Run(
        run_id=run_id,
        levels=levels,
        replication=int(item.get("replication", 0)),
        warmup_s=_non_negative(item, "warmup_s"),
        cooldown_s=_non_negative(item, "cooldown_s"),
        start_ns=_optional_int(item.get("start_ns")),
        end_ns=_optional_int(item.get("end_ns")),
        clock_offsets=dict(item.get("clock_offsets") or {}),
        arrival=run_arrival,
    )


def _non_negative(item: dict[str, Any], key: str) -> float:
    value = float(item.get(key) or 0.0)
    if value < 0:
        raise ValueError(f"run {item['run_id']}: {key} is negative")
    return value


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _describe(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"missing key {exc.args[0]!r}"
    return str(exc)
