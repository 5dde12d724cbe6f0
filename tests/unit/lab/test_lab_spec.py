"""Experiment specs: parsing, checking, and expansion into runs."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from courier.lab import cluster, spec

TWO_BY_TWO = """
name = "two-by-two"
[system]
middleware = 2
[workload]
mix = { standard = 4 }
[run]
duration_s = 20
warmup_s = 2
cooldown_s = 1
replications = 3
[factors]
message_size = [200, 2000]
dataset = ["empty", "full"]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.toml"
    path.write_text(text)
    return path


def test_a_spec_expands_to_every_combination_times_every_replication(tmp_path: Path) -> None:
    experiment = spec.load(write(tmp_path, TWO_BY_TWO))
    runs = experiment.expand()
    assert len(runs) == 2 * 2 * 3
    assert [run.run_id for run in runs] == [f"r{n:03d}" for n in range(12)]
    expected = [
        ({"message_size": size, "dataset": dataset}, replication)
        for size, dataset in itertools.product([200, 2000], ["empty", "full"])
        for replication in range(3)
    ]
    assert [(run.levels, run.replication) for run in runs] == expected


def test_factor_levels_override_the_base_configuration_and_nothing_else(tmp_path: Path) -> None:
    runs = spec.load(write(tmp_path, TWO_BY_TWO)).expand()
    for run in runs:
        assert run.config.message_size == run.levels["message_size"]
        assert run.config.dataset == run.levels["dataset"]
        assert run.config.middleware == 2
        assert run.config.duration_s == 20
        assert dict(run.config.mix) == {"standard": 4}


def test_without_factors_there_is_one_run_per_replication(tmp_path: Path) -> None:
    text = 'name = "one"\n[run]\nduration_s = 5\nwarmup_s = 1\ncooldown_s = 1\n'
    runs = spec.load(write(tmp_path, text)).expand()
    assert [(run.run_id, run.levels, run.replication) for run in runs] == [("r000", {}, 0)]


def test_the_name_defaults_to_the_file_name(tmp_path: Path) -> None:
    path = tmp_path / "sweep.toml"
    path.write_text("[run]\nduration_s = 5\nwarmup_s = 1\ncooldown_s = 1\n")
    assert spec.load(path).name == "sweep"


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("[system]\nmiddlewares = 2\n", r"unknown keys in \[system\]"),
        ("[factors]\nflavour = [1, 2]\n", "not a parameter"),
        ("[factors]\nmessage_size = []\n", "non-empty list"),
        ("[factors]\nmock = ['none', 'everything']\n", "mock must be one of"),
        ("[workload]\nmix = { juggler = 3 }\n", "unknown behaviour"),
        ("[workload]\npriorities = 11\n", "priorities"),
        ("[workload]\narrival = 'open'\n", "rate > 0"),
        ("[run]\nduration_s = 10\nwarmup_s = 8\ncooldown_s = 2\n", "shorter than duration_s"),
        ("[workload]\ndataset = 'full'\n[system]\nmock = 'database'\n", "real database"),
        ("[run]\nreplications = 0\n", "at least 1"),
        ("colour = 'red'\n", "unknown top-level keys"),
        ("this is not toml", "not valid TOML"),
    ],
)
def test_bad_specs_get_a_spec_error_naming_the_problem(
    tmp_path: Path, text: str, complaint: str
) -> None:
    with pytest.raises(spec.SpecError, match=complaint):
        spec.load(write(tmp_path, text))


def test_a_missing_spec_file_is_a_spec_error(tmp_path: Path) -> None:
    with pytest.raises(spec.SpecError, match="no experiment spec"):
        spec.load(tmp_path / "absent.toml")


def test_clients_scale_the_mix_as_weights() -> None:
    config = spec.build_config({"mix": {"sender": 5, "reader": 3}, "clients": 16})
    assert config.client_counts() == {"sender": 10, "reader": 6}


def test_scaled_counts_round_to_the_nearest_share_and_sum_to_the_total() -> None:
    config = spec.build_config({"mix": {"sender": 1, "reader": 1, "bouncer": 1}, "clients": 10})
    counts = config.client_counts()
    assert sum(counts.values()) == 10
    assert sorted(counts.values()) == [3, 3, 4]  # 10/3 = 3.33 each: one gets the extra


def test_clients_per_middleware_multiplies_by_the_middleware_count() -> None:
    config = spec.build_config(
        {"mix": {"standard": 1}, "clients_per_middleware": 16, "middleware": 3}
    )
    assert config.client_counts() == {"standard": 48}
    assert config.total_clients == 48


def test_without_scaling_the_mix_counts_are_the_clients() -> None:
    config = spec.build_config({"mix": {"pair-client": 5, "pair-server": 2}})
    assert config.client_counts() == {"pair-client": 5, "pair-server": 2}


def test_every_example_spec_in_the_repository_parses() -> None:
    examples = sorted(Path(__file__).parents[3].joinpath("experiments").glob("*.toml"))
    assert {path.stem for path in examples} >= {"demo", "smoke"}
    for path in examples:
        if path.stem.startswith("supply-"):
            continue  # benchmark specs: tests/unit/lab/test_lab_supply_topology.py
        if path.stem.startswith("cluster-"):
            assert cluster.load(path).runs(), path  # `courier lab cluster` specs
            continue
        assert spec.load(path).expand(), path
