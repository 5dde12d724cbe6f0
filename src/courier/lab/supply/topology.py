"""The benchmark spec and its scaling rules: which locations run, at which rates.

    name = "supply"
    [system]
    middleware = 1
    [run]
    duration_s = 40
    warmup_s = 10
    cooldown_s = 5
    [benchmark]
    topology = "horizontal"        # "horizontal" | "vertical" | "freeform"
    base = 2
    [horizontal]                   # locations per BASE unit (one headquarters in all)
    sm = 5
    [rates]                        # interactions started per location per second
    orders = 0.2
    [sizes]                        # a kind's body sizes (bytes) and their weights
    order = { 1000 = 0.9, 8000 = 0.1 }
    [handlers]                     # consumers per destination of a kind (default 1)
    shipConf = 0                   # nobody takes it: its backlog grows
    [search]
    start = 1
    max_runs = 8

Scaling rules (``plan``): *horizontal* multiplies the locations of ``[horizontal]``
by BASE (one headquarters whatever BASE is) at the rates of ``[rates]``;
*vertical* keeps the locations of ``[vertical]`` and multiplies every rate by BASE;
*freeform* keeps the locations of ``[freeform]`` and multiplies every rate by BASE
(its mix is whatever the spec's rates make it). docs/lab.md gives the defaults and
the message mix they produce.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from courier.lab import spec as lab_spec
from courier.lab.supply import kinds

TOPOLOGIES = ("horizontal", "vertical", "freeform")
UNIT = {"sm": 5, "dc": 1, "sp": 2, "hq": 1}
"""Default locations per BASE unit (horizontal) and fixed locations (vertical)."""
RATES = {
    "orders": 0.2,
    "purchases": 1.0,
    "price_updates": 1.0,
    "inventory": 0.4,
    "sales_stats": 2.4,
    "product_announcements": 2.1,
    "credit_card_hotlist": 2.1,
}
"""Default interactions per second per starting location; with UNIT they give the
target mix (docs/lab.md): half point-to-point, half of those persistent, a quarter
of the pub/sub copies persistent."""
SMALL, MEDIUM, LARGE = 400, 2_000, 16_000
SIZES: dict[str, dict[int, float]] = {
    **{name: {SMALL: 0.95, MEDIUM: 0.05} for name in ("orderConf", "shipConf", "pShipConf",
                                                       "pOrderConf", "shipDep", "offer")},
    **{name: {MEDIUM: 0.9, LARGE: 0.1} for name in ("order", "pOrder", "invoice", "shipInfo",
                                                     "pShipInfo", "callForOffers")},
    **{name: {SMALL: 0.5, MEDIUM: 0.5} for name in ("statInfoOrderDC", "statInfoShipDC",
                                                     "statInfoSM", "inventoryInfo")},
    **{name: {MEDIUM: 0.99, LARGE: 0.01} for name in ("priceUpdate", "productAnnouncement",
                                                       "creditCardHL")},
}  # fmt: skip
"""Default body sizes per kind: small, medium and large classes with their weights."""
SEARCH_RUNS = 8
KNOWN_TABLES = (
    "name", "description", "system", "run", "benchmark", "horizontal", "vertical",
    "freeform", "rates", "sizes", "handlers", "search",
)  # fmt: skip


SpecError = lab_spec.SpecError
"""The benchmark spec is invalid (the lab's spec error: the run's checks are shared)."""


@dataclass(frozen=True, slots=True)
class Sizes:
    """A body size distribution: sizes in bytes with their weights."""

    sizes: tuple[int, ...]
    weights: tuple[float, ...]

    def sample(self, rng: random.Random) -> int:
        if len(self.sizes) == 1:
            return self.sizes[0]
        return rng.choices(self.sizes, weights=self.weights)[0]

    @property
    def mean(self) -> float:
        return sum(s * w for s, w in zip(self.sizes, self.weights, strict=True)) / sum(self.weights)


@dataclass(frozen=True, slots=True)
class SearchLimits:
    start: int = 1
    max_runs: int = SEARCH_RUNS
    max_base: int = 1024


@dataclass(frozen=True)
class BenchSpec:
    """A benchmark spec as read: the system, the run's times, the scaling tables."""

    name: str
    raw: dict[str, Any]
    system: lab_spec.RunConfig  # middleware, pool, processes and the run's seconds
    durable: bool
    topology: str
    base: int
    locations: dict[str, dict[str, int]]  # topology -> location type -> count
    rates: dict[str, float]
    sizes: dict[str, Sizes]
    handlers: dict[str, int]
    search: SearchLimits = field(default_factory=SearchLimits)
    seed: int = 1

    def plan(self, base: int | None = None, topology: str | None = None) -> Plan:
        return plan(self, self.base if base is None else base, topology or self.topology)


@dataclass(frozen=True)
class Plan:
    """One BASE of one topology: how many locations of each type, and their rates."""

    topology: str
    base: int
    locations: dict[str, int]
    rates: dict[str, float]  # interaction -> starts per second per starting location

    def names(self, location_type: str) -> list[str]:
        return [f"{location_type}-{index:03d}" for index in range(self.locations[location_type])]

    def all_names(self) -> list[str]:
        return [name for kind in kinds.LOCATION_TYPES for name in self.names(kind)]

    @property
    def families(self) -> int:
        """callForOffers topics (product families): one per supplier."""
        return max(1, self.locations["sp"])

    def offers_per_call(self) -> int:
        """Suppliers subscribed to each family: each subscribes to two families."""
        return min(2, self.locations["sp"])


def plan(bench: BenchSpec, base: int, topology: str) -> Plan:
    """The scaling rules of docs/lab.md applied to BASE."""
    if topology not in TOPOLOGIES:
        raise SpecError(f"topology must be one of {TOPOLOGIES}, not {topology!r}")
    if base < 1:
        raise SpecError("BASE must be at least 1")
    table = bench.locations[topology]
    if topology == "horizontal":
        scaled = {name: count * base for name, count in table.items()}
        return Plan(topology, base, {**scaled, "hq": 1}, dict(bench.rates))
    rates = {name: rate * base for name, rate in bench.rates.items()}
    return Plan(topology, base, {**table, "hq": 1}, rates)


def load(path: Path) -> BenchSpec:
    return parse(lab_spec.read_toml(path, "benchmark spec"), default_name=Path(path).stem)


def parse(raw: dict[str, Any], *, default_name: str = "supply") -> BenchSpec:
    """A checked BenchSpec; SpecError names what is wrong."""
    unknown = set(raw) - set(KNOWN_TABLES)
    _require(not unknown, f"unknown tables: {', '.join(sorted(unknown))}")
    system = dict(_table(raw, "system"))
    durable = system.pop("durable", True)
    _require(isinstance(durable, bool), "durable must be true or false")
    benchmark = _table(raw, "benchmark")
    _require(set(benchmark) <= {"topology", "base", "seed"}, "[benchmark] has topology, base, seed")
    bench = BenchSpec(
        name=str(raw.get("name", default_name)),
        raw=raw,
        system=lab_spec.build_config({**system, **_table(raw, "run")}),
        durable=durable,
        topology=str(benchmark.get("topology", "horizontal")),
        base=int(benchmark.get("base", 1)),
        locations={name: _locations(raw, name) for name in TOPOLOGIES},
        rates=_rates(_table(raw, "rates")),
        sizes=_sizes(_table(raw, "sizes")),
        handlers=_handlers(_table(raw, "handlers")),
        search=SearchLimits(**_table(raw, "search")),
        seed=int(benchmark.get("seed", 1)),
    )
    _check(bench)
    return bench


def _table(raw: Mapping[str, Any], name: str) -> dict[str, Any]:
    table = raw.get(name, {})
    _require(isinstance(table, dict), f"[{name}] must be a table")
    return dict(table)


def _locations(raw: Mapping[str, Any], topology: str) -> dict[str, int]:
    table = _table(raw, topology)
    _require(set(table) <= {"sm", "dc", "sp"}, f"[{topology}] counts sm, dc and sp")
    counts = {name: int(table.get(name, UNIT[name])) for name in ("sm", "dc", "sp")}
    _require(min(counts.values()) >= 1, f"[{topology}]: every location type needs one or more")
    return counts


def _rates(table: Mapping[str, Any]) -> dict[str, float]:
    _require(set(table) <= set(RATES), f"[rates] names interactions: {', '.join(RATES)}")
    rates = {name: float(table.get(name, default)) for name, default in RATES.items()}
    _require(min(rates.values()) >= 0, "[rates] must not be negative")
    return rates


def _sizes(table: Mapping[str, Any]) -> dict[str, Sizes]:
    _require(set(table) <= set(kinds.KINDS), "[sizes] names message kinds")
    found = {}
    for name in kinds.KINDS:
        given = table.get(name, SIZES[name])
        _require(isinstance(given, Mapping) and bool(given), f"sizes of {name}: size = weight")
        sizes = tuple(int(size) for size in given)
        weights = tuple(float(weight) for weight in given.values())
        _require(min(sizes) >= 1 and min(weights) >= 0 < sum(weights), f"bad sizes of {name}")
        found[name] = Sizes(sizes, weights)
    return found


def _handlers(table: Mapping[str, Any]) -> dict[str, int]:
    _require(set(table) <= set(kinds.KINDS), "[handlers] names message kinds")
    handlers = {name: int(table.get(name, 1)) for name in kinds.KINDS}
    _require(min(handlers.values()) >= 0, "[handlers] must not be negative")
    return handlers


def _check(bench: BenchSpec) -> None:
    _require(bench.topology in TOPOLOGIES, f"topology must be one of {TOPOLOGIES}")
    _require(bench.base >= 1, "base must be at least 1")
    limits = bench.search
    _require(1 <= limits.start <= limits.max_base, "search: need 1 <= start <= max_base")
    _require(limits.max_runs >= 2, "search: max_runs must be at least 2")


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise SpecError(message)
