"""`courier bench` options: checked before anything starts, also from the environment."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from courier.bench import defaults, rabbit, sweep
from courier.cli import main


def invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(main.cli, ["bench", *args], env=env)
    return result.exit_code, result.output


def test_bench_is_a_courier_command() -> None:
    code, output = invoke("--help")
    assert code == 0
    assert all(name in output for name in ("peers", "standard", "churn", "flat", "pops", "fuzz"))


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (("--systems", "courier,kafka"), "choose from courier, courier-db, rabbitmq"),
        (("--modes", "persistent,fast"), "choose from persistent, non-persistent"),
        (("--modes", ","), "choose from persistent, non-persistent"),
        (("--clients", "1,many"), "expected numbers"),
        (("--clients", "0,4"), "each at least 1"),
        (("--duration", "0"), "must be positive"),
        (("--warmup", "-1"), "must not be negative"),
        (("--plot", "out.gif"), "name a .png or .svg file"),
        (("--systems", "rabbitmq", "--rabbitmq", "none"), "no system left to run"),
    ],
)
def test_bad_options_are_refused(args: tuple[str, ...], complaint: str) -> None:
    code, output = invoke("peers", *args)
    assert code == 2
    assert complaint in output


@pytest.mark.parametrize("variable", ["COURIER_BENCH_RABBITMQ", "COURIER_BENCH_PEERS_RABBITMQ"])
def test_the_rabbitmq_url_comes_from_the_environment(variable: str) -> None:
    code, output = invoke("peers", "--systems", "rabbitmq", env={variable: "none"})
    assert code == 2
    assert "no system left to run" in output


def test_every_option_is_an_environment_variable() -> None:
    code, output = invoke("peers", env={"COURIER_BENCH_PEERS_CLIENTS": "lots"})
    assert code == 2 and "'lots': expected numbers" in output
    code, output = invoke("standard", env={"COURIER_BENCH_STANDARD_CLIENTS": "0"})
    assert code == 2 and "must be positive" in output


@pytest.mark.parametrize(
    ("command", "args", "complaint"),
    [
        ("churn", ("--interval", "0"), "must be positive"),
        ("churn", ("--clients", "0"), "must be positive"),
        ("churn", ("--warmup", "-1"), "must not be negative"),
        ("churn", ("--plot", "out.gif"), "name a .png or .svg file"),
        ("flat", ("--background", "0,-5"), "each at least 0"),
        ("flat", ("--background", "0,lots"), "expected numbers"),
        ("flat", ("--samples", "0"), "must be positive"),
        ("pops", ("--poppers", "0,4"), "each at least 1"),
        ("pops", ("--messages", "0"), "must be positive"),
        ("pops", ("--batch", "0"), "must be positive"),
        ("fuzz", ("--frames", "0"), "must be positive"),
        ("fuzz", ("--connections", "0"), "must be positive"),
        ("fuzz", ("--frame-timeout", "0"), "must be positive"),
        ("fuzz", ("--servers", "here"), "expected host:port"),
        ("fuzz", ("--servers", "127.0.0.1:7400", "--dsn", "postgresql://x"), "takes no --dsn"),
    ],
)
def test_bad_options_of_the_long_benchmarks_are_refused(
    command: str, args: tuple[str, ...], complaint: str
) -> None:
    code, output = invoke(command, *args)
    assert code == 2
    assert complaint in output


@pytest.mark.parametrize(
    ("variable", "value", "complaint"),
    [
        ("COURIER_BENCH_CHURN_INTERVAL", "-1", "must be positive"),
        ("COURIER_BENCH_CHURN_DURATION", "0", "must be positive"),
        ("COURIER_BENCH_FLAT_BACKGROUND", "many", "expected numbers"),
        ("COURIER_BENCH_FLAT_SAMPLES", "0", "must be positive"),
        ("COURIER_BENCH_POPS_POPPERS", "0", "each at least 1"),
        ("COURIER_BENCH_POPS_BATCH", "0", "must be positive"),
    ],
)
def test_the_long_benchmarks_read_their_options_from_the_environment(
    variable: str, value: str, complaint: str
) -> None:
    command = variable.split("_")[2].lower()
    code, output = invoke(command, env={variable: value})
    assert code == 2 and complaint in output


def test_passwords_stay_out_of_what_is_shown() -> None:
    assert rabbit.shown("amqp://guest:secret@host:5672/vh") == "amqp://guest:***@host:5672/vh"
    assert rabbit.shown("amqp://host:5672/") == "amqp://host:5672/"


def test_each_of_courier_s_systems_runs_once_per_mode_and_the_others_once() -> None:
    settings = sweep.Settings(
        systems=("courier", "rabbitmq", "courier-db"), modes=defaults.MODES, rabbitmq="amqp://x"
    )
    assert sweep._runs(settings) == [
        ("courier", "persistent"), ("courier", "non-persistent"),
        ("rabbitmq", "persistent"),
        ("courier-db", "persistent"), ("courier-db", "non-persistent"),
    ]  # fmt: skip
