"""2^k r factorial analysis (sign table method).

With k two-level factors and r replications of each of the 2^k combinations, the
model is ``y = q0 + sum_j q_j x_j + e`` where each x_j is a product of factor
signs (-1 for a factor's first declared level, +1 for its second). Effects are
``q_j = (1 / 2^k) sum_i sign_ij * mean_i``; the variation a term explains is
``SS_j = 2^k r q_j^2`` and ``SST = sum SS_j + SSE``. With r >= 2 the effects get
Student-t intervals ``q_j +- t[1 - alpha/2; 2^k (r - 1)] * s_e / sqrt(2^k r)``;
an effect is significant when its interval excludes zero.
"""

from __future__ import annotations

import itertools
import math
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as sp_stats

from courier.measurements import manifest as manifest_

CONFIDENCE = 0.95


@dataclass(frozen=True, slots=True)
class Effect:
    """One term of the model: q0 (``I``), a main effect or an interaction."""

    term: str  # letters, e.g. "A", "AB"; "I" for the mean
    label: str  # factor names, e.g. "clients x instances"
    estimate: float
    sum_of_squares: float | None
    variation: float | None  # fraction of SST explained; None for q0
    ci_low: float | None
    ci_high: float | None

    @property
    def significant(self) -> bool | None:
        if self.ci_low is None or self.ci_high is None:
            return None
        return not self.ci_low <= 0.0 <= self.ci_high


@dataclass(frozen=True)
class Result:
    """The analysis of one response variable."""

    response: str
    factors: tuple[str, ...]
    replications: int
    terms: tuple[str, ...]  # sign-table columns after I
    signs: np.ndarray  # (2^k, 2^k) with column 0 = I
    observations: np.ndarray  # (2^k, r)
    effects: tuple[Effect, ...]
    sse: float
    sst: float
    confidence: float

    @property
    def error_variation(self) -> float | None:
        return self.sse / self.sst if self.replications > 1 and self.sst > 0 else None

    @property
    def error_std(self) -> float | None:
        dof = self.error_dof
        return math.sqrt(self.sse / dof) if dof > 0 else None

    @property
    def error_dof(self) -> int:
        return len(self.signs) * (self.replications - 1)


def letters(k: int) -> str:
    return string.ascii_uppercase[:k]


def term_names(k: int) -> tuple[str, ...]:
    """Main effects then interactions by order: A, B, C, AB, AC, BC, ABC."""
    names = letters(k)
    return tuple(
        "".join(combo) for size in range(1, k + 1) for combo in itertools.combinations(names, size)
    )


def sign_table(k: int) -> np.ndarray:
    """Rows in standard order (A alternates fastest); columns I then ``term_names(k)``."""
    factor_signs = np.array(
        [[1 if (row >> j) & 1 else -1 for j in range(k)] for row in range(2**k)]
    )
    columns = [np.ones(2**k, dtype=int)]
    for term in term_names(k):
        indices = [string.ascii_uppercase.index(letter) for letter in term]
        columns.append(np.prod(factor_signs[:, indices], axis=1))
    return np.column_stack(columns)


def analyse(
    observations: np.ndarray,
    factors: Sequence[str],
    response: str,
    confidence: float = CONFIDENCE,
) -> Result:
    """Effects, allocation of variation and intervals of a 2^k r design."""
    y = np.asarray(observations, dtype=float)
    k = len(factors)
    combos, r = y.shape
    if combos != 2**k or r < 1:
        raise ValueError(f"need 2^{k} rows of replications, got shape {y.shape}")
    signs = sign_table(k)
    q = signs.T @ y.mean(axis=1) / combos
    sse = float(((y - y.mean(axis=1, keepdims=True)) ** 2).sum())
    sum_of_squares = combos * r * q[1:] ** 2
    sst = float(sum_of_squares.sum() + sse)
    half_width = _half_width(sse, combos, r, confidence)
    terms = term_names(k)
    effects = [Effect("I", "mean", float(q[0]), None, None, *_interval(q[0], half_width))]
    for j, term in enumerate(terms, start=1):
        effects.append(
            Effect(
                term=term,
                label=" x ".join(factors[letters(k).index(ch)] for ch in term),
                estimate=float(q[j]),
                sum_of_squares=float(sum_of_squares[j - 1]),
                variation=float(sum_of_squares[j - 1] / sst) if sst > 0 else None,
                ci_low=_interval(q[j], half_width)[0],
                ci_high=_interval(q[j], half_width)[1],
            )
        )
    return Result(
        response, tuple(factors), r, terms, signs, y, tuple(effects), sse, sst, confidence
    )


def _half_width(sse: float, combos: int, r: int, confidence: float) -> float | None:
    if r < 2:
        return None
    dof = combos * (r - 1)
    std_effect = math.sqrt(sse / dof) / math.sqrt(combos * r)
    return float(sp_stats.t.ppf((1 + confidence) / 2, dof)) * std_effect


def _interval(estimate: float, half_width: float | None) -> tuple[float | None, float | None]:
    if half_width is None:
        return None, None
    return float(estimate - half_width), float(estimate + half_width)


def design_from_runs(
    experiment: manifest_.Manifest, values: Mapping[str, float]
) -> tuple[np.ndarray | None, str]:
    """Arrange per-run values as (2^k, r) observations; (None, why) if not a 2^k r design."""
    names = experiment.factor_names
    if not names:
        return None, "the experiment varies no factor"
    if any(len(levels) != 2 for levels in experiment.factors.values()):
        return None, "not every factor has exactly two levels"
    cells: dict[int, list[float]] = {row: [] for row in range(2 ** len(names))}
    for run in sorted(experiment.runs, key=lambda r: r.replication):
        if run.run_id not in values or any(name not in run.levels for name in names):
            continue
        cells[_row_of(run.levels, experiment.factors, names)].append(values[run.run_id])
    counts = {len(cell) for cell in cells.values()}
    if len(counts) != 1 or 0 in counts:
        return None, "the combinations do not all have the same number of measured runs"
    return np.array([cells[row] for row in sorted(cells)]), ""


def _row_of(levels: Mapping[str, Any], factors: Mapping[str, list[Any]], names: list[str]) -> int:
    """The standard-order row of a combination: bit j set when factor j is high."""
    return sum(1 << j for j, name in enumerate(names) if levels[name] == factors[name][1])
