"""`courier lab`: run experiments, run a load-generator process by hand, check clocks.

    courier lab run experiments/demo.toml            # the whole experiment, locally
    courier lab run SPEC --dsn DSN --servers H:P,... # against an existing deployment
    courier lab clients --servers H:P --record-dir DIR --run-id r000 --count 16
    courier lab clock --servers H:P,H:P              # clock offsets of middleware
    courier lab align experiments/NAME               # apply them to collected records
    courier lab cluster experiments/cluster-balancing.toml  # replicated queues (docs/nodes.md)

docs/lab.md describes specs, workloads and multi-host set-ups.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import click
import uvloop
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from courier import config, errors

console = Console(stderr=True)


@click.group()
def lab() -> None:
    """Measure Courier: experiments, load generators, clocks."""


@lab.command()
@click.argument("spec_path", metavar="SPEC.toml", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("experiments"),
    show_default=True,
    help="Experiments directory; records go to OUT/<name>/<run_id>/.",
)
@click.option("--dsn", default=None, help="Reset and use this database (default: a fresh one).")
@click.option("--servers", default=None, help="Use these running middleware (host:port,...).")
@click.option("--overwrite", is_flag=True, help="Replace an earlier experiment of that name.")
def run(spec_path: Path, out: Path, dsn: str | None, servers: str | None, overwrite: bool) -> None:
    """Run the experiment described by SPEC.toml."""
    from courier.lab import runner, spec

    try:
        experiment = spec.load(spec_path)
    except errors.CourierError as exc:
        raise click.ClickException(exc.message) from exc
    options = runner.RunnerOptions(
        out=out,
        dsn=dsn,
        servers=tuple(_addresses(servers)) if servers else (),
        overwrite=overwrite,
    )
    reporter = RichReporter(experiment.name, len(experiment.expand()))
    signal.signal(signal.SIGTERM, interrupt)  # a kill tears down like Ctrl-C does
    try:
        with reporter:
            directory = uvloop.run(runner.run_experiment(experiment, options, reporter))
    except KeyboardInterrupt:
        console.print("[yellow]interrupted: every process the runner started is stopped")
        raise SystemExit(130) from None
    except (errors.CourierError, OSError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from exc
    console.print(f"[green]done:[/] {directory}")


def interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


class RichReporter:
    """A progress bar over the runs and one over the current run's seconds."""

    def __init__(self, name: str, runs: int) -> None:
        self.name = name
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed:.0f}/{task.total:.0f}"),
            TimeRemainingColumn(),
            console=console,
        )
        self._runs = self.progress.add_task(f"{name}: runs", total=runs)
        self._seconds = self.progress.add_task("run", total=1, visible=False)

    def __enter__(self) -> RichReporter:
        self.progress.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.progress.stop()

    def run_started(self, planned: object, index: int, total: int) -> None:
        from courier.lab import spec

        assert isinstance(planned, spec.PlannedRun)
        levels = ", ".join(f"{key}={value}" for key, value in planned.levels.items())
        label = f"{planned.run_id} rep {planned.replication}" + (f" ({levels})" if levels else "")
        self.progress.update(self._runs, total=total, completed=index)
        self.progress.reset(self._seconds, total=planned.config.duration_s, visible=True)
        self.progress.update(self._seconds, description=f"  {label}: seconds")

    def run_progress(self, elapsed_s: float, duration_s: float) -> None:
        self.progress.update(self._seconds, completed=elapsed_s)

    def run_finished(self, planned: object, summary: object) -> None:
        from courier.lab import runner

        assert isinstance(summary, runner.RunSummary)
        self.progress.advance(self._runs)
        errors_text = f", {summary.errors} failed iterations" if summary.errors else ""
        rate = summary.requests / summary.duration_s if summary.duration_s else 0.0
        self.note(
            f"{summary.run_id}: {summary.requests} requests in {summary.duration_s:.1f} s"
            f" ({rate:.0f}/s){errors_text}"
        )
        if summary.last_error:
            self.note(f"  last error: {summary.last_error}")
        for address, code in summary.middleware_exit_codes.items():
            if code not in (0, None):
                self.note(f"  [yellow]middleware {address} exited with {code}: see its log")

    def note(self, text: str) -> None:
        self.progress.console.print(text)


@lab.command()
@click.option("--servers", required=True, help="Middleware to use (host:port,...).")
@click.option("--record-dir", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--run-id", required=True, help="Run id written into every record.")
@click.option("--process", default=None, help="Process name (default: host-pid).")
@click.option("--behaviour", default="standard", show_default=True, help="Workload behaviour.")
@click.option("--count", default=8, show_default=True, help="Clients in this process.")
@click.option("--duration", default=60.0, show_default=True, help="Seconds of load.")
@click.option("--message-size", default=200, show_default=True, help="Characters per message.")
@click.option("--queues", default=10, show_default=True, help="Size of the shared queue set.")
@click.option("--think-time-ms", default=0.0, show_default=True)
@click.option("--rate", default=0.0, show_default=True, help="Open loop: arrivals/s per client.")
@click.option("--clock-offset-ns", default=0, show_default=True, help="This host's clock minus "
              "the reference clock; subtracted from every instant recorded.")  # fmt: skip
def clients(
    servers: str,
    record_dir: Path,
    run_id: str,
    process: str | None,
    behaviour: str,
    count: int,
    duration: float,
    message_size: int,
    queues: int,
    think_time_ms: float,
    rate: float,
    clock_offset_ns: int,
) -> None:
    """Run one load-generator process against running middleware, recording to a dir."""
    from courier.lab import remote, workloads

    if behaviour not in workloads.BEHAVIOURS:
        raise click.BadParameter(
            f"one of {', '.join(workloads.BEHAVIOURS)}", param_hint="behaviour"
        )
    options = remote.ClientsOptions(
        servers=tuple(_addresses(servers)),
        record_dir=record_dir,
        run_id=run_id,
        process=process or remote.default_process_name(),
        behaviour=behaviour,
        count=count,
        duration_s=duration,
        message_size=message_size,
        queues=queues,
        think_time_s=think_time_ms / 1000,
        rate=rate,
        clock_offset_ns=clock_offset_ns,
    )
    try:
        result = uvloop.run(remote.run_clients(options))
    except errors.CourierError as exc:
        raise click.ClickException(exc.message) from exc
    console.print(
        f"{result.process}: {result.requests} requests, {result.errors} failed iterations;"
        f" records in {record_dir}"
    )


@lab.command()
@click.option("--servers", required=True, help="Middleware to measure (host:port,...).")
@click.option("--samples", default=9, show_default=True, help="PINGs per middleware.")
def clock(servers: str, samples: int) -> None:
    """Print each middleware's clock offset from this host (server minus local)."""
    from courier.client import AsyncClient

    async def measure() -> list[tuple[str, int, int]]:
        found = []
        for address in _addresses(servers):
            async with AsyncClient([address]) as client:
                await client.open()
                offset, uncertainty = await client.clock_offset(samples)
            found.append((address, offset, uncertainty))
        return found

    try:
        for address, offset, uncertainty in asyncio.run(measure()):
            click.echo(f"{address}\toffset_ns={offset}\tuncertainty_ns={uncertainty}")
    except errors.CourierError as exc:
        raise click.ClickException(exc.message) from exc


@lab.command()
@click.argument("experiment_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
def align(experiment_dir: Path) -> None:
    """Apply the measured clock offsets of middleware on other hosts to their records.

    Run it once the record files of remote middleware are in the run directories.
    """
    from courier.lab import clocks

    applied = clocks.align_experiment(experiment_dir)
    for run_id, offsets in sorted(applied.items()):
        for instance, offset_ns in offsets.items():
            click.echo(f"{run_id}\t{instance}\tshifted by {-offset_ns} ns")
    if not applied:
        click.echo("nothing to apply: every offset is within its uncertainty (or applied)")


def _addresses(text: str) -> list[str]:
    try:
        return [f"{host}:{port}" for host, port in config.parse_servers(text)]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--servers") from exc


from courier.cli import lab_bench, lab_cluster  # noqa: E402  (add bench, scale, cluster)

__all__ = ["lab", "lab_bench", "lab_cluster"]
