"""`courier lab cluster SPEC`: a cluster experiment, then its report.

    courier lab cluster experiments/cluster-balancing.toml      # balanced vs round robin
    courier lab cluster experiments/cluster-provisioning.toml   # static vs dynamic

Each run starts fresh node databases, recording middleware, the controller and
the clients (courier.lab.cluster); the report (courier.analysis.replication) plots each
member's production and consumption rates and lengths, and the controller's
decisions. docs/nodes.md describes the specs.
"""

from __future__ import annotations

import signal
from pathlib import Path

import click
import uvloop
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from courier import errors
from courier.cli.lab import console, interrupt, lab


@lab.command(name="cluster")
@click.argument("spec_path", metavar="SPEC.toml", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("experiments"),
    show_default=True,
    help="Experiments directory; records go to OUT/<name>/<run_id>/.",
)
@click.option("--analyze/--no-analyze", default=True, show_default=True,
              help="Write the report after the runs.")  # fmt: skip
def cluster_command(spec_path: Path, out: Path, analyze: bool) -> None:
    """Run the cluster experiment SPEC.toml and report on it."""
    from courier.lab import cluster

    try:
        spec = cluster.load(spec_path)
    except errors.CourierError as exc:
        raise click.ClickException(exc.message) from exc
    signal.signal(signal.SIGTERM, interrupt)
    try:
        directory = _run(spec, out)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted: every process the experiment started is stopped")
        raise SystemExit(130) from None
    except (errors.CourierError, OSError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from exc
    console.print(f"[green]records:[/] {directory}")
    if analyze:
        from courier.analysis import replication

        report = replication.write_report(directory)
        console.print(f"[green]report:[/] {report}")


def _run(spec: object, out: Path) -> Path:
    from courier.lab import cluster

    assert isinstance(spec, cluster.ClusterSpec)
    bars = Progress(
        TextColumn("{task.description}"), BarColumn(),
        TextColumn("{task.completed:.0f}/{task.total:.0f}"), TimeElapsedColumn(),
        console=console,
    )  # fmt: skip
    tasks: dict[str, tuple[object, object]] = {}

    def report(run_id: str, run: cluster.ClusterRun, progress: cluster.Progress) -> None:
        if run_id not in tasks:
            total = run.consumers * run.messages_per_consumer
            tasks[run_id] = (
                bars.add_task(f"{run_id}: sent", total=run.producers * run.messages_per_producer),
                bars.add_task(f"{run_id}: received", total=total),
            )
        sent, received = tasks[run_id]
        bars.update(sent, completed=progress.sent)  # type: ignore[arg-type]
        bars.update(received, completed=progress.received)  # type: ignore[arg-type]

    with bars:
        return uvloop.run(cluster.run_experiment(spec, out, report=report))
