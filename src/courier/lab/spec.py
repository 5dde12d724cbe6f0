"""Experiment specs: a TOML file naming a base configuration, factors and replications.

    name = "size-x-dataset"
    [system]
    middleware = 2
    [workload]
    mix = { standard = 16 }
    [run]
    duration_s = 30
    warmup_s = 5
    cooldown_s = 3
    replications = 2
    [factors]
    message_size = [200, 2000]
    dataset = ["empty", "full"]

Every parameter has one name across the sections, so a factor is just a parameter
name with a list of levels. ``expand`` yields one ``PlannedRun`` per combination of
levels and replication, in a fixed order with ids ``r000``, ``r001``, ...
docs/lab.md lists every parameter.
"""

from __future__ import annotations

import dataclasses
import itertools
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from courier import config, errors
from courier.lab import workloads

MOCK_TIERS = ("none", "middleware", "database")
DATASETS = ("empty", "full")
ARRIVALS = ("closed", "open")
SECTIONS = ("system", "workload", "run")


class SpecError(errors.BadRequest):
    """The experiment spec is invalid."""


_SERVE = config.ServerSettings()  # a run's middleware defaults are `courier serve`'s


@dataclass(frozen=True, slots=True)
class RunConfig:
    """Every parameter of one run; a spec's sections fill it, factors override it."""

    # [system]
    middleware: int = 1
    pool_size: int = _SERVE.pool.max_size
    max_clients: int = _SERVE.max_clients
    mock: str = "none"
    client_processes: int = 2
    # [workload]
    mix: Mapping[str, int] = field(default_factory=lambda: {"standard": 8})
    clients: int = 0  # when > 0, mix counts are weights scaled to this many clients
    clients_per_middleware: int = 0  # when > 0, clients = this x middleware
    message_size: int = 200
    priorities: Any = "uniform"  # "uniform" (1..10), a fixed int, or {priority: weight}
    queues: int = 10
    targets_per_message: int = 1
    think_time_ms: float = 0.0
    dataset: str = "empty"
    arrival: str = "closed"
    rate: float = 0.0  # open loop: Poisson arrivals per second, per client
    seed: int = 1
    # [run]
    duration_s: float = 60.0
    requests_per_client: int = 0  # when > 0, each client stops after this many requests
    warmup_s: float = 10.0
    cooldown_s: float = 5.0

    def client_counts(self) -> dict[str, int]:
        """Clients per behaviour after applying ``clients`` / ``clients_per_middleware``."""
        total = self.clients_per_middleware * self.middleware or self.clients
        if not total:
            return dict(self.mix)
        return _scale(dict(self.mix), total)

    @property
    def total_clients(self) -> int:
        return sum(self.client_counts().values())


SECTION_OF: dict[str, str] = {
    **{name: "system" for name in ("middleware", "pool_size", "max_clients", "mock")},
    "client_processes": "system",
    **{name: "run" for name in ("duration_s", "requests_per_client", "warmup_s", "cooldown_s")},
}
PARAMETERS = tuple(f.name for f in dataclasses.fields(RunConfig))


@dataclass(frozen=True, slots=True)
class PlannedRun:
    run_id: str
    levels: dict[str, Any]
    replication: int
    config: RunConfig


@dataclass(frozen=True, slots=True)
class ExperimentSpec:
    name: str
    base: RunConfig
    factors: dict[str, list[Any]]
    replications: int
    raw: dict[str, Any]
    durable: bool = True  # experiment-wide: the embedded database fsyncs (not a factor)

    def expand(self) -> list[PlannedRun]:
        return list(_expand(self))


def load(path: Path) -> ExperimentSpec:
    """Read and check a spec file; SpecError on anything wrong with it."""
    return parse(read_toml(path, "experiment spec"), default_name=Path(path).stem)


def read_toml(path: Path, what: str) -> dict[str, Any]:
    """The TOML file's tables; SpecError when it is missing or not TOML."""
    try:
        with Path(path).open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError as exc:
        raise SpecError(f"no {what} at {path}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path}: not valid TOML: {exc}") from exc


def parse(raw: dict[str, Any], *, default_name: str = "experiment") -> ExperimentSpec:
    unknown = set(raw) - {"name", "description", "factors", "replications", *SECTIONS}
    if unknown:
        raise SpecError(f"unknown top-level keys: {', '.join(sorted(unknown))}")
    values: dict[str, Any] = {}
    for section in SECTIONS:
        values.update(_section(raw, section))
    replications = int(values.pop("replications", raw.get("replications", 1)))
    durable = values.pop("durable", True)
    if not isinstance(durable, bool):
        raise SpecError("durable must be true or false")
    if replications < 1:
        raise SpecError("replications must be at least 1")
    base = build_config(values)
    factors = _factors(raw.get("factors", {}))
    for run in _expand_levels(factors):
        build_config({**values, **run})  # every combination must be a valid config
    name = str(raw.get("name", default_name))
    return ExperimentSpec(name, base, factors, replications, raw, durable)


def build_config(values: Mapping[str, Any]) -> RunConfig:
    """A RunConfig from parameter values, checked; SpecError names the bad one."""
    unknown = set(values) - set(PARAMETERS)
    if unknown:
        raise SpecError(f"unknown parameters: {', '.join(sorted(unknown))}")
    try:
        config = RunConfig(**values)
    except TypeError as exc:
        raise SpecError(str(exc)) from exc
    _check(config)
    return config


def _section(raw: dict[str, Any], section: str) -> dict[str, Any]:
    table = raw.get(section, {})
    if not isinstance(table, dict):
        raise SpecError(f"[{section}] must be a table")
    allowed = {p for p in PARAMETERS if _section_of(p) == section}
    if section == "run":
        allowed.add("replications")
    if section == "system":
        allowed.add("durable")
    unknown = set(table) - allowed
    if unknown:
        raise SpecError(f"unknown keys in [{section}]: {', '.join(sorted(unknown))}")
    return dict(table)


def _section_of(parameter: str) -> str:
    return SECTION_OF.get(parameter, "workload")


def _factors(table: Any) -> dict[str, list[Any]]:
    if not isinstance(table, dict):
        raise SpecError("[factors] must be a table of parameter = [levels]")
    factors: dict[str, list[Any]] = {}
    for name, levels in table.items():
        if name not in PARAMETERS:
            raise SpecError(f"factor {name!r} is not a parameter")
        if not isinstance(levels, list) or not levels:
            raise SpecError(f"factor {name!r} needs a non-empty list of levels")
        factors[name] = levels
    return factors


def _expand_levels(factors: dict[str, list[Any]]) -> Iterator[dict[str, Any]]:
    names = list(factors)
    for combination in itertools.product(*(factors[name] for name in names)):
        yield dict(zip(names, combination, strict=True))


def _expand(spec: ExperimentSpec) -> Iterator[PlannedRun]:
    number = 0
    for levels in _expand_levels(spec.factors):
        config = dataclasses.replace(spec.base, **levels)
        for replication in range(spec.replications):
            yield PlannedRun(f"r{number:03d}", dict(levels), replication, config)
            number += 1


def _check(config: RunConfig) -> None:
    _require(config.middleware >= 1, "middleware must be at least 1")
    _require(config.pool_size >= 1, "pool_size must be at least 1")
    _require(config.client_processes >= 1, "client_processes must be at least 1")
    _require(config.mock in MOCK_TIERS, f"mock must be one of {MOCK_TIERS}")
    _require(config.dataset in DATASETS, f"dataset must be one of {DATASETS}")
    _require(config.arrival in ARRIVALS, f"arrival must be one of {ARRIVALS}")
    _require(config.arrival == "closed" or config.rate > 0, "open arrival needs rate > 0")
    _require(config.message_size >= 1, "message_size must be at least 1")
    _require(1 <= config.targets_per_message <= config.queues, "need 1 <= targets <= queues")
    _require(config.duration_s > 0, "duration_s must be positive")
    _require(config.requests_per_client >= 0, "requests_per_client must not be negative")
    _require(config.think_time_ms >= 0, "think_time_ms must not be negative")
    _require(
        config.dataset == "empty" or config.mock == "none",
        'the full dataset needs the real database (mock = "none")',
    )
    _require(
        config.warmup_s + config.cooldown_s < config.duration_s,
        "warmup_s + cooldown_s must be shorter than duration_s",
    )
    _check_mix(config.mix)
    try:
        workloads.PriorityChoice.parse(config.priorities)
    except ValueError as exc:
        raise SpecError(f"priorities: {exc}") from exc


def _check_mix(mix: Mapping[str, int]) -> None:
    _require(isinstance(mix, Mapping) and bool(mix), "mix must be a table behaviour = count")
    for behaviour, count in mix.items():
        _require(behaviour in workloads.BEHAVIOURS, f"unknown behaviour {behaviour!r}")
        _require(isinstance(count, int | float) and count >= 0, f"bad count for {behaviour}")
    _require(sum(mix.values()) > 0, "mix needs at least one client")


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise SpecError(message)


def _scale(weights: dict[str, int], total: int) -> dict[str, int]:
    """Split ``total`` clients over behaviours in proportion to weights (largest remainder)."""
    weight_sum = sum(weights.values())
    exact = {name: total * weight / weight_sum for name, weight in weights.items()}
    counts = {name: int(value) for name, value in exact.items()}
    by_remainder = sorted(exact, key=lambda name: exact[name] - counts[name], reverse=True)
    for name in by_remainder[: total - sum(counts.values())]:
        counts[name] += 1
    return counts
