"""`courier bench`: benchmarks anyone can run on their own machine.

    courier bench peers                   # Courier, its database tier, RabbitMQ; 1..1024 clients
    courier bench peers --systems courier,courier-db --clients 1,16 --duration 3
    courier bench standard --clients 64   # the lab's standard cycle, in one table
    courier bench churn                   # 10 minutes of send + pop, minute by minute
    courier bench flat --background 0,100000 --samples 500
    courier bench pops --poppers 1,4,16,64 --batched
    courier bench fuzz                    # 1,000,000 broken frames; exits 1 if anything breaks
    courier bench chaos --messages 100000 # kill -9 middleware, restart PostgreSQL; lose nothing

Every option is also an environment variable (COURIER_BENCH_PEERS_CLIENTS, ...;
the RabbitMQ URL also as COURIER_BENCH_RABBITMQ). docs/performance.md explains
what is measured and how to read it.
"""

from __future__ import annotations

import json
import secrets
import signal
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import click
import uvloop
from rich.console import Console

from courier import config, errors
from courier.bench import defaults
from courier.cli.options import shared_option

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

stderr = Console(stderr=True)

json_option = click.option(
    "--json",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the results to this JSON file.",
)


def plot_option(what: str) -> Callable[[F], F]:
    return click.option(
        "--plot",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help=f"Draw {what} (.png or .svg).",
    )


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
@shared_option(
    "--rabbitmq",
    shared_envvar="COURIER_BENCH_RABBITMQ",
    default=defaults.RABBITMQ_URL,
    show_default=True,
    help="RabbitMQ URL; 'none' leaves RabbitMQ out.",
)
@click.option(
    "--batch",
    default=1,
    show_default=True,
    type=click.IntRange(1, 1000),
    help="Messages per send and per pop: send_many then pop_many (RabbitMQ: confirms per"
    " batch, consumer prefetch of the batch).",
)
@click.option(
    "--modes",
    default=defaults.PERSISTENT,
    show_default=True,
    help="Courier's delivery modes, each run in turn: persistent, non-persistent (messages"
    " skip the write-ahead log), or both, comma-separated; a non-persistent run is"
    " named courier/non-persistent. RabbitMQ runs once.",
)
@click.option(
    "--login",
    type=click.Choice(["secret", "open"]),
    default="secret",
    show_default=True,
    help="How Courier's clients log in: each with a secret of its own (SCRAM), or by"
    " name alone on middleware started with --open-login.",
)
@click.option(
    "--tls",
    is_flag=True,
    help="Courier's clients and middleware speak TLS (a CA made for the run).",
)
@click.option(
    "--rounds",
    default=1,
    show_default=True,
    type=click.IntRange(1, 20),
    help="Times the whole sweep runs, the systems and levels in reverse order every other round;"
    " the ratios are then given per round and as their median, smallest and largest.",
)
@click.option(
    "--order",
    type=click.Choice(defaults.ORDERS),
    default=defaults.BY_LEVEL,
    show_default=True,
    help="levels: at each level every system in turn (the others idle), so the runs a"
    " ratio compares are seconds apart; systems: each system over every level, stopped"
    " before the next starts.",
)
@json_option
@plot_option("throughput and p99 against clients")
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
    batch: int,
    login: str,
    modes: str,
    tls: bool,
    rounds: int,
    order: str,
    json: Path | None,
    plot: Path | None,
) -> None:
    """Send + pop on one shared queue: Courier, its database tier, and RabbitMQ."""
    from courier.bench import output, sweep

    _check_positive(duration=duration, processes=processes, middlewares=middlewares,
                    pool_size=pool_size)  # fmt: skip
    _check_warmup(warmup)
    _check_plot(plot)
    no_rabbitmq = rabbitmq.strip().lower() == "none"
    chosen = tuple(s for s in _systems(systems) if not (no_rabbitmq and s == defaults.RABBITMQ))
    if not chosen:
        raise click.UsageError("no system left to run: --rabbitmq none leaves RabbitMQ out")
    settings = sweep.Settings(
        systems=chosen, clients=_levels(clients), duration_s=duration, warmup_s=warmup,
        processes=processes, middlewares=middlewares, pool_size=pool_size, dsn=dsn,
        rabbitmq=None if no_rabbitmq else rabbitmq, batch=batch,
        open_login=login == "open", tls=tls, modes=_modes(modes), rounds=rounds,
        order=order,
    )  # fmt: skip
    with output.ProgressReporter(stderr) as reporter:
        outcome = _interruptible(lambda: sweep.run(settings, reporter))
    stdout = output.stdout()
    for table in output.level_tables(outcome.results):
        stdout.print(table)
    spread = output.spread_table(outcome.results)
    if spread is not None:
        stdout.print(spread)
    if len({result.system for result in outcome.results}) > 1:
        stdout.print(output.RATIO_CAPTION, highlight=False)
    for reason in outcome.skipped.values():
        stdout.print(reason, markup=False, highlight=False)
    if outcome.pace is not None:
        stderr.print(outcome.pace.describe(), highlight=False, soft_wrap=True)
    if json is not None:
        _write_json(json, outcome.document(settings))
    if plot is not None and outcome.results:
        output.plot(outcome.results, plot)
        stderr.print(f"plot: {plot}")


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
@json_option
def standard(
    clients: int,
    middlewares: int,
    duration: float,
    warmup: float,
    processes: int,
    out: Path | None,
    json: Path | None,
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
    if found.pace is not None:
        stderr.print(found.pace.describe(), highlight=False, soft_wrap=True)
    if out is not None:
        stderr.print(f"records: {out / cycle.NAME}")
    if json is not None:
        _write_json(json, found.as_json(settings))


@bench.command()
@click.option(
    "--clients", default=defaults.CHURN_CLIENTS, show_default=True, help="Clients in the loop."
)
@click.option(
    "--middlewares", default=defaults.MIDDLEWARES, show_default=True, help="Middleware processes."
)
@click.option(
    "--duration", default=defaults.CHURN_DURATION_S, show_default=True, help="Measured seconds."
)
@click.option(
    "--interval", default=defaults.CHURN_INTERVAL_S, show_default=True, help="Seconds per interval."
)
@click.option(
    "--warmup", default=defaults.WARMUP_S, show_default=True, help="Unmeasured seconds before them."
)
@click.option(
    "--processes", default=defaults.PROCESSES, show_default=True, help="Client processes."
)
@click.option(
    "--pool-size",
    default=defaults.SERVE.pool.max_size,
    show_default=True,
    help="Database connections per middleware.",
)
@json_option
@plot_option("throughput per interval and dead rows against time")
def churn(
    clients: int,
    middlewares: int,
    duration: float,
    interval: float,
    warmup: float,
    processes: int,
    pool_size: int,
    json: Path | None,
    plot: Path | None,
) -> None:
    """Send + pop through Courier for minutes: throughput, latency and dead rows per interval."""
    from courier.bench import churn as long_run
    from courier.bench import output

    _check_positive(clients=clients, middlewares=middlewares, duration=duration,
                    interval=interval, processes=processes, pool_size=pool_size)  # fmt: skip
    _check_warmup(warmup)
    _check_plot(plot)
    settings = long_run.Settings(
        clients=clients, middlewares=middlewares, duration_s=duration, interval_s=interval,
        warmup_s=warmup, processes=processes, pool_size=pool_size,
    )  # fmt: skip
    with output.ProgressReporter(stderr) as reporter:
        found = _interruptible(lambda: long_run.run(settings, reporter))
    stdout = output.stdout()
    stdout.print(output.churn_table(settings, found))
    _print_lines(stdout, found.verdict())
    if found.totals.errors:
        stdout.print(f"{found.totals.errors} requests failed; the last: {found.totals.last_error}",
                     markup=False, highlight=False)  # fmt: skip
    if json is not None:
        _write_json(json, found.as_json(settings))
    if plot is not None:
        output.churn_plot(found, plot)
        stderr.print(f"plot: {plot}")


@bench.command()
@click.option(
    "--background",
    default=",".join(map(str, defaults.FLAT_BACKGROUND)),
    show_default=True,
    help="Levels: messages stored for other queues and other receivers.",
)
@click.option(
    "--samples", default=defaults.FLAT_SAMPLES, show_default=True, help="Measured pops per level."
)
@click.option(
    "--pool-size",
    default=defaults.SERVE.pool.max_size,
    show_default=True,
    help="Database connections of the middleware.",
)
@json_option
@plot_option("pop and send latency against the background")
def flat(
    background: str, samples: int, pool_size: int, json: Path | None, plot: Path | None
) -> None:
    """A pop's latency with 0 to millions of messages for others stored beside it."""
    from courier.bench import flat as beside
    from courier.bench import output

    _check_positive(samples=samples, pool_size=pool_size)
    _check_plot(plot)
    levels = _levels(background, "--background", least=0)
    settings = beside.Settings(background=levels, samples=samples, pool_size=pool_size)
    with output.ProgressReporter(stderr) as reporter:
        found = _interruptible(lambda: beside.run(settings, reporter))
    stdout = output.stdout()
    stdout.print(output.flat_table(found))
    _print_lines(stdout, found.verdict())
    if json is not None:
        _write_json(json, found.as_json(settings))
    if plot is not None:
        output.flat_plot(found, plot)
        stderr.print(f"plot: {plot}")


@bench.command()
@click.option(
    "--messages", default=defaults.POPS_MESSAGES, show_default=True, help="Messages per level."
)
@click.option(
    "--poppers",
    default=",".join(map(str, defaults.POPS_POPPERS)),
    show_default=True,
    help="Levels: concurrent database connections popping.",
)
@click.option("--batched", is_flag=True, help="Pop --batch messages per call (pop_each).")
@click.option(
    "--batch", default=defaults.POPS_BATCH, show_default=True, help="Pops per call with --batched."
)
@click.option(
    "--processes", default=defaults.PROCESSES, show_default=True, help="Popper processes."
)
@json_option
def pops(
    messages: int,
    poppers: str,
    batched: bool,
    batch: int,
    processes: int,
    json: Path | None,
) -> None:
    """Courier's database tier emptying a full queue with 1 to 64 connections."""
    from courier.bench import output
    from courier.bench import pops as emptying

    _check_positive(messages=messages, batch=batch, processes=processes)
    settings = emptying.Settings(
        messages=messages, poppers=_levels(poppers, "--poppers"), batch=batch if batched else 0,
        processes=processes,
    )  # fmt: skip
    with output.ProgressReporter(stderr) as reporter:
        found = _interruptible(lambda: emptying.run(settings, reporter))
    stdout = output.stdout()
    stdout.print(output.pops_table(settings, found))
    _print_lines(stdout, found.verdict())
    if json is not None:
        _write_json(json, found.as_json(settings))


@bench.command()
@click.option(
    "--frames", default=defaults.FUZZ_FRAMES, show_default=True, help="Frames to send in all."
)
@click.option(
    "--connections",
    default=defaults.FUZZ_CONNECTIONS,
    show_default=True,
    help="Fuzzing connections open at once; every eighth stalls mid-frame.",
)
@click.option("--middlewares", default=1, show_default=True, help="Middleware processes to start.")
@click.option(
    "--frame-timeout",
    default=defaults.FUZZ_FRAME_TIMEOUT_S,
    show_default=True,
    help="The middleware's --frame-timeout: given to those started here; with --servers,"
    " say what theirs is.",
)
@click.option(
    "--servers",
    metavar="HOST:PORT,...",
    default=None,
    help="Fuzz these running middleware instead of starting any.",
)
@click.option(
    "--dsn",
    default=None,
    help="Use this PostgreSQL (migrated if needed) instead of a fresh embedded one.",
)
@click.option(
    "--pool-size",
    default=defaults.SERVE.pool.max_size,
    show_default=True,
    help="Database connections per middleware.",
)
@click.option("--seed", type=int, default=None, help="Seed of the frames, to repeat a run.")
@json_option
def fuzz(
    frames: int,
    connections: int,
    middlewares: int,
    frame_timeout: float,
    servers: str | None,
    dsn: str | None,
    pool_size: int,
    seed: int | None,
    json: Path | None,
) -> None:
    """Broken frames at the middleware while well-behaved clients check that nothing is lost."""
    from courier.bench import fuzz as fuzzing
    from courier.bench import output

    _check_positive(frames=frames, connections=connections, middlewares=middlewares,
                    frame_timeout=frame_timeout, pool_size=pool_size)  # fmt: skip
    if servers and dsn:
        raise click.UsageError("--servers fuzzes running middleware: it takes no --dsn")
    settings = fuzzing.Settings(
        frames=frames, connections=connections, middlewares=middlewares,
        frame_timeout_s=frame_timeout, servers=_addresses(servers), dsn=dsn,
        pool_size=pool_size, seed=secrets.randbits(32) if seed is None else seed,
    )  # fmt: skip
    with output.ProgressReporter(stderr) as reporter:
        found = _interruptible(lambda: fuzzing.run(settings, reporter))
    stdout = output.stdout()
    for table in output.fuzz_tables(found):
        stdout.print(table)
    _print_lines(stdout, found.verdict())
    if json is not None:
        _write_json(json, found.as_json())
    if found.failures():
        raise SystemExit(1)


@bench.command()
@click.option(
    "--messages", default=defaults.CHAOS_MESSAGES, show_default=True, help="Messages to send."
)
@click.option(
    "--producers", default=defaults.CHAOS_PRODUCERS, show_default=True, help="Sending clients."
)
@click.option(
    "--consumers",
    default=defaults.CHAOS_CONSUMERS,
    show_default=True,
    help="Clients receiving with a lease and acking.",
)
@click.option(
    "--middlewares",
    default=defaults.CHAOS_MIDDLEWARES,
    show_default=True,
    help="Middleware processes.",
)
@click.option(
    "--kill-interval",
    default=defaults.CHAOS_KILL_INTERVAL_S,
    show_default=True,
    help="Seconds between kills of a random middleware.",
)
@click.option(
    "--lease", default=defaults.CHAOS_LEASE_S, show_default=True, help="Seconds of a lease."
)
@click.option(
    "--process-time",
    default=defaults.CHAOS_PROCESS_S,
    show_default=True,
    help="Seconds a consumer spends on a message before acking it.",
)
@click.option(
    "--window",
    default=defaults.CHAOS_WINDOW,
    show_default=True,
    help="Calls each client keeps in flight: sends, or receive-process-ack loops.",
)
@click.option(
    "--processes", default=defaults.PROCESSES, show_default=True, help="Client processes."
)
@click.option(
    "--pool-size",
    default=defaults.SERVE.pool.max_size,
    show_default=True,
    help="Database connections per middleware.",
)
@click.option(
    "--restart-database/--no-restart-database",
    default=True,
    show_default=True,
    help="Restart PostgreSQL once, half-way.",
)
@click.option(
    "--log-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep the middleware logs here (default: a temporary directory).",
)
@json_option
def chaos(
    messages: int,
    producers: int,
    consumers: int,
    middlewares: int,
    kill_interval: float,
    lease: float,
    process_time: float,
    window: int,
    processes: int,
    pool_size: int,
    restart_database: bool,
    log_dir: Path | None,
    json: Path | None,
) -> None:
    """Kill -9 middleware and restart PostgreSQL under load: every message acked exactly once."""
    from courier.bench import chaos as abuse
    from courier.bench import output

    _check_positive(messages=messages, producers=producers, consumers=consumers,
                    middlewares=middlewares, kill_interval=kill_interval, lease=lease,
                    window=window, processes=processes, pool_size=pool_size)  # fmt: skip
    if process_time < 0:
        raise click.BadParameter("must not be negative", param_hint="--process-time")
    settings = abuse.Settings(
        messages=messages, producers=producers, consumers=consumers, middlewares=middlewares,
        kill_interval_s=kill_interval, lease_s=lease, process_s=process_time, window=window,
        processes=processes, pool_size=pool_size, restart_database=restart_database,
        log_dir=log_dir,
    )  # fmt: skip
    with output.ProgressReporter(stderr) as reporter:
        found = _interruptible(lambda: abuse.run(settings, reporter))
    stdout = output.stdout()
    stdout.print(output.chaos_table(settings, found))
    _print_lines(stdout, found.verdict())
    if found.accounts.errors:
        errors_seen = ", ".join(
            f"{name} {count:,}" for name, count in found.accounts.errors.items()
        )
        stdout.print(f"failed calls (retried or skipped): {errors_seen}; the last:"
                     f" {found.accounts.last_error}", markup=False, highlight=False)  # fmt: skip
    if json is not None:
        _write_json(json, found.as_json(settings))
    if not found.passed:
        raise SystemExit(1)


def _addresses(text: str | None) -> tuple[str, ...]:
    if not text:
        return ()
    try:
        parsed = config.parse_servers(text)
    except ValueError:
        raise click.BadParameter(
            f"{text!r}: expected host:port,...", param_hint="--servers"
        ) from None
    return tuple(f"{host}:{port}" for host, port in parsed)


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
    return _choices(text, defaults.SYSTEMS, "--systems")


def _modes(text: str) -> tuple[str, ...]:
    return _choices(text, defaults.MODES, "--modes")


def _choices(text: str, allowed: tuple[str, ...], hint: str) -> tuple[str, ...]:
    """A comma-separated list of some of ``allowed``, in the order given, once each."""
    names = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    unknown = [name for name in names if name not in allowed]
    if unknown or not names:
        choose = f"choose from {', '.join(allowed)} (got {text!r})"
        raise click.BadParameter(choose, param_hint=hint)
    return names


def _levels(text: str, hint: str = "--clients", least: int = 1) -> tuple[int, ...]:
    try:
        levels = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise click.BadParameter(
            f"{text!r}: expected numbers like 1,16,64", param_hint=hint
        ) from None
    if not levels or levels[0] < least:
        raise click.BadParameter(f"at least one level, each at least {least}", param_hint=hint)
    return tuple(levels)


def _check_plot(path: Path | None) -> None:
    from courier.bench import output

    if path is not None and path.suffix.lower() not in output.PLOT_SUFFIXES:
        raise click.BadParameter("name a .png or .svg file", param_hint="--plot")


def _print_lines(console: Console, lines: list[str]) -> None:
    for line in lines:
        console.print(line, markup=False, highlight=False)


def _check_positive(**values: float) -> None:
    for name, value in values.items():
        if value <= 0:
            raise click.BadParameter("must be positive", param_hint="--" + name.replace("_", "-"))


def _check_warmup(warmup: float) -> None:
    if warmup < 0:
        raise click.BadParameter("must not be negative", param_hint="--warmup")
