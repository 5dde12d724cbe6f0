"""The 2^k r analysis reproduces Jain's 2^2 3 example (memory and cache sizes).

R. Jain, The Art of Computer Systems Performance Analysis (1991), chapter 18:
A = memory size, B = cache size, y in MIPS, three replications per combination.
The expected values below follow from the book's definitions by hand:
  means 15, 48, 24, 77; q = (164, 86, 38, 20) / 4 = 41, 21.5, 9.5, 5;
  SS = 2^2 * 3 * q^2 = 5547, 1083, 300; SSE = 18 + 18 + 42 + 24 = 102; SST = 7032;
  so A explains 5547/7032 = 78.9%, B 15.4%, AB 4.3% and error 1.5%.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats as sp_stats

from courier.analysis import factorial
from courier.measurements import manifest

JAIN = np.array([[15, 18, 12], [45, 48, 51], [25, 28, 19], [75, 75, 81]], dtype=float)


@pytest.fixture(scope="module")
def result() -> factorial.Result:
    return factorial.analyse(JAIN, ["memory", "cache"], "MIPS")


def test_sign_table_is_the_standard_order() -> None:
    expected = [[1, -1, -1, 1], [1, 1, -1, -1], [1, -1, 1, -1], [1, 1, 1, 1]]
    assert factorial.sign_table(2).tolist() == expected
    assert factorial.term_names(3) == ("A", "B", "C", "AB", "AC", "BC", "ABC")


def test_sign_table_columns_are_orthogonal() -> None:
    signs = factorial.sign_table(4)
    assert (signs.T @ signs == 16 * np.eye(16)).all()


def test_effects(result: factorial.Result) -> None:
    estimates = {e.term: e.estimate for e in result.effects}
    assert estimates == pytest.approx({"I": 41.0, "A": 21.5, "B": 9.5, "AB": 5.0})
    labels = {e.term: e.label for e in result.effects}
    assert labels["AB"] == "memory x cache"


def test_sums_of_squares(result: factorial.Result) -> None:
    assert result.sse == pytest.approx(102.0)
    assert result.sst == pytest.approx(7032.0)
    assert result.sst == pytest.approx(((JAIN - JAIN.mean()) ** 2).sum())
    by_term = {e.term: e.sum_of_squares for e in result.effects if e.term != "I"}
    assert by_term == pytest.approx({"A": 5547.0, "B": 1083.0, "AB": 300.0})


def test_allocation_of_variation(result: factorial.Result) -> None:
    shares = {e.term: round(100 * (e.variation or 0), 1) for e in result.effects if e.term != "I"}
    assert shares == {"A": 78.9, "B": 15.4, "AB": 4.3}
    assert result.error_variation is not None
    assert round(100 * result.error_variation, 1) == 1.5
    total = sum(e.variation or 0 for e in result.effects) + result.error_variation
    assert total == pytest.approx(1.0)


def test_effect_intervals_use_student_t(result: factorial.Result) -> None:
    dof = 2**2 * (3 - 1)
    s_e = np.sqrt(102.0 / dof)
    half = sp_stats.t.ppf(0.975, dof) * s_e / np.sqrt(2**2 * 3)
    assert result.error_dof == dof
    assert result.error_std == pytest.approx(s_e)
    for effect, q in zip(result.effects, (41.0, 21.5, 9.5, 5.0), strict=True):
        assert (effect.ci_low, effect.ci_high) == pytest.approx((q - half, q + half))
        assert effect.significant  # every interval excludes zero in this example


def test_a_small_effect_is_not_significant() -> None:
    y = np.array([[10.0, 12.0], [11.5, 10.5], [20.0, 21.0], [20.5, 21.5]])
    effects = {e.term: e for e in factorial.analyse(y, ["a", "b"], "y").effects}
    assert effects["B"].significant
    assert effects["A"].significant is False


def test_one_replication_has_no_error_estimate() -> None:
    analysis = factorial.analyse(JAIN[:, :1], ["memory", "cache"], "MIPS")
    assert analysis.error_std is None and analysis.error_variation is None
    assert all(e.ci_low is None and e.significant is None for e in analysis.effects)
    assert sum(e.variation or 0 for e in analysis.effects) == pytest.approx(1.0)


def _manifest(tmp_path: Path, runs: list[dict[str, Any]]) -> manifest.Manifest:
    factors = {"memory": ["4MB", "16MB"], "cache": ["1KB", "2KB"]}
    document = {"name": "jain", "factors": factors, "runs": runs}
    (tmp_path / "manifest.json").write_text(json.dumps(document))
    return manifest.load(tmp_path)


def test_design_from_runs_arranges_replications_by_sign_row(tmp_path: Path) -> None:
    runs: list[dict[str, Any]] = []
    values: dict[str, float] = {}
    for row, (memory, cache) in enumerate(
        [("4MB", "1KB"), ("16MB", "1KB"), ("4MB", "2KB"), ("16MB", "2KB")]
    ):
        for replication in range(3):
            run_id = f"r{row}{replication}"
            runs.append(
                {
                    "run_id": run_id,
                    "levels": {"memory": memory, "cache": cache},
                    "replication": replication,
                }
            )
            values[run_id] = float(JAIN[row, replication])
    observations, why = factorial.design_from_runs(_manifest(tmp_path, runs[::-1]), values)
    assert why == ""
    assert observations is not None
    assert observations.tolist() == JAIN.tolist()  # rows in sign order, replications in order


def test_design_from_runs_rejects_a_missing_combination(tmp_path: Path) -> None:
    runs = [{"run_id": "r0", "levels": {"memory": "4MB", "cache": "1KB"}}]
    observations, why = factorial.design_from_runs(_manifest(tmp_path, runs), {"r0": 1.0})
    assert observations is None
    assert "same number" in why
