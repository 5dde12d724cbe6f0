"""`courier bench`: benchmarks anyone can run on their own machine.

    courier bench peers                   # Courier, its database tier, RabbitMQ; 1..1024 clients
    courier bench peers --systems courier,courier-db --clients 1,16 --duration 3
    courier bench standard --clients 64   # the lab's standard cycle, in one table

Every option is also an environment variable (COURIER_BENCH_PEERS_CLIENTS, ...;
the RabbitMQ URL also as COURIER_BENCH_RABBITMQ). docs/performance.md explains
what is measured and how to read it.
"""

from __future__ import annotations

import json
import signal
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import click
import uvloop
from rich.console import Console

from courier import errors
from courier.bench import defaults

T = TypeVar("T")

stderr = Console(stderr=True)


@click.group()
def bench() -> None:
    """Measure Courier's throughput and latency, alone and against its peers."""


@bench.command()
@click.option(
    "--systems",
    default=",".join(defaults.SYSTEMS),
    show_default=True,
    help="Systems to run, in this order.",
)
@click.option(
    "--clients",
    default=",".join(map(str, defaults.CLIENT_LEVELS)),
    show_default=True,
    help="Levels: numbers of concurrent clients.",
)
@click.option(
    "--duration", default=defaults.DURATION_S, show_default=True, help="Measured seconds per level."
)
@click.option(
    "--warmup", default=defaults.WARMUP_S, show_default=True, help="Unmeasured seconds before them."
)
@click.option(
    "--processes", default=defaults.PROCESSES, show_default=True, help="Client processes per level."
)
@click.option(
    "--middlewares",
    default=defaults.MIDDLEWARES,
    show_default=True,
    help="Courier middleware processes.",
)
@click.option(
    "--pool-size",
    default=defaults.SERVE.pool.max_size,
    show_default=True,
    help="Database connections per middleware.",
)
@click.option(
    "--dsn",
    default=None,
    help="Use this PostgreSQL (migrated if needed) instead of a fresh embedded one.",
)
@click.option(
    "--rabbitmq",
    envvar=["COURIER_BENCH_PEERS_RABBITMQ", "COURIER_BENCH_RABBITMQ"],
    default=defaults.RABBITMQ_URL,
    show_default=True,
    help="RabbitMQ URL; 'none' leaves RabbitMQ out.",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write every result to this JSON file.",
)
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Draw throughput and p99 against clients (.png or .svg).",
)
def peers(
    systems: str,
    clients: str,
    duration: float,
    warmup: float,
    processes: int,
    middlewares: int,
    pool_size: int,
    dsn: str | None,
    rabbitmq: str,
    json_path: Path | None,
    plot_path: Path | None,
) -> None:
    """Send + pop on one shared queue: Courier, its database tier, and RabbitMQ."""
    from courier.bench import output, sweep

    _check_positive(duration=duration, processes=processes, middlewares=middlewares,
                    pool_size=pool_size)  # fmt: skip
    _check_warmup(warmup)
    if plot_path is not None and plot_path.suffix.lower() not in output.PLOT_SUFFIXES:
        raise click.BadParameter("name a .png or .svg file", param_hint="--plot")
    no_rabbitmq = rabbitmq.strip().lower() == "none"
    chosen = tuple(s for s in _systems(systems) if not (no_rabbitmq and s == defaults.RABBITMQ))
    if not chosen:
        raise click.UsageError("no system left to run: --rabbitmq none leaves RabbitMQ out")
    settings = sweep.Settings(
        systems=chosen, clients=_levels(clients), duration_s=duration, warmup_s=warmup,
        processes=processes, middlewares=middlewares, pool_size=pool_size, dsn=dsn,
        rabbitmq=None if no_rabbitmq else rabbitmq,
    )  # fmt: skip
    with output.ProgressReporter(stderr) as reporter:
        outcome = _interruptible(lambda: sweep.run(settings, reporter))
    stdout = output.stdout()
    for table in output.level_tables(outcome.results):
        stdout.print(table)
    if len({result.system for result in outcome.results}) > 1:
        stdout.print(output.RATIO_CAPTION, highlight=False)
    for reason in outcome.skipped.values():
        stdout.print(reason, markup=False, highlight=False)
    if json_path is not None:
        _write_json(json_path, outcome.document(settings))
    if plot_path is not None and outcome.results:
        output.plot(outcome.results, plot_path)
        stderr.print(f"plot: {plot_path}")


@bench.command()
@click.option("--clients", default=64, show_default=True, help="Clients running the cycle.")
@click.option(
    "--middlewares", default=defaults.MIDDLEWARES, show_default=True, help="Middleware processes."
)
@click.option(
    "--duration", default=defaults.DURATION_S, show_default=True, help="Measured seconds."
)
@click.option(
    "--warmup", default=defaults.WARMUP_S, show_default=True, help="Unmeasured seconds before them."
)
@click.option(
    "--processes", default=defaults.PROCESSES, show_default=True, help="Load-generator processes."
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep the lab records in OUT/bench-standard/ (for `courier analyze`).",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the results to this JSON file.",
)
def standard(
    clients: int,
    middlewares: int,
    duration: float,
    warmup: float,
    processes: int,
    out: Path | None,
    json_path: Path | None,
) -> None:
    """The lab's 12-step standard cycle: requests/s and latency, overall and per operation."""
    from courier.bench import output
    from courier.bench import standard as cycle
    from courier.cli import lab

    _check_positive(clients=clients, middlewares=middlewares, duration=duration,
                    processes=processes)  # fmt: skip
    _check_warmup(warmup)
    settings = cycle.Settings(clients, middlewares, duration, warmup, processes)
    with tempfile.TemporaryDirectory(prefix="courier-bench-") as scratch:
        where = out if out is not None else Path(scratch)
        with lab.RichReporter(cycle.NAME, 1) as reporter:
            found = _interruptible(lambda: cycle.run(settings, where, reporter))
    output.stdout().print(output.standard_table(settings, found))
    if out is not None:
        stderr.print(f"records: {out / cycle.NAME}")
    if json_path is not None:
        _write_json(json_path, found.as_json(settings))


def _interruptible(work: Callable[[], Awaitable[T]]) -> T:
    """Run on uvloop; Ctrl-C or SIGTERM stops everything it started, then exits."""
    signal.signal(signal.SIGTERM, _interrupt)

    async def main() -> T:
        return await work()

    try:
        return uvloop.run(main())
    except KeyboardInterrupt:
        stderr.print("[yellow]interrupted: every process the benchmark started is stopped")
        raise SystemExit(130) from None
    except (errors.CourierError, OSError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from exc


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _write_json(path: Path, document: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, allow_nan=False) + "\n")
    stderr.print(f"results: {path}")


def _systems(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    unknown = [name for name in names if name not in defaults.SYSTEMS]
    if unknown or not names:
        raise click.BadParameter(
            f"choose from {', '.join(defaults.SYSTEMS)} (got {text!r})", param_hint="--systems"
        )
    return names


def _levels(text: str) -> tuple[int, ...]:
    try:
        levels = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise click.BadParameter(
            f"{text!r}: expected numbers like 1,16,64", param_hint="--clients"
        ) from None
    if not levels or levels[0] < 1:
        raise click.BadParameter("at least one level, each at least 1", param_hint="--clients")
    return tuple(levels)


def _check_positive(**values: float) -> None:
    for name, value in values.items():
        if value <= 0:
            raise click.BadParameter("must be positive", param_hint="--" + name.replace("_", "-"))


def _check_warmup(warmup: float) -> None:
    if warmup < 0:
        raise click.BadParameter("must not be negative", param_hint="--warmup")
