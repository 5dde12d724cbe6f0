"""`courier lab bench` and `courier lab scale`: the supply-chain benchmark.

    courier lab bench experiments/supply.toml --base 2          # one run, judged
    courier lab scale experiments/supply.toml --topology horizontal

Both run the benchmark (docs/lab.md, "The supply-chain benchmark"), judge every
run with the Spark analysis as it finishes, print the verdict with its evidence
and write the evidence tables (and for a search its plot) to
``<experiment>/benchmark/``.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import uvloop
from rich.table import Table

from courier import errors
from courier.cli.lab import RichReporter, console, interrupt, lab
from courier.lab.supply import search

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

EVIDENCE_DIR = "benchmark"

spec_argument = click.argument(
    "spec_path", metavar="SPEC.toml", type=click.Path(dir_okay=False, path_type=Path)
)
out_option = click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("experiments"),
    show_default=True,
    help="Experiments directory; records go to OUT/<name>-<topology>/<run_id>/.",
)
topology_option = click.option(
    "--topology",
    type=click.Choice(["horizontal", "vertical", "freeform"]),
    default=None,
    help="Scaling rules (default: the spec's [benchmark] topology).",
)
overwrite_option = click.option(
    "--overwrite", is_flag=True, help="Replace an earlier experiment of that name."
)


@lab.command()
@spec_argument
@click.option(
    "--base", type=click.IntRange(min=1), default=None, help="BASE (default: the spec's)."
)
@topology_option
@out_option
@overwrite_option
def bench(
    spec_path: Path, base: int | None, topology: str | None, out: Path, overwrite: bool
) -> None:
    """Run the benchmark once at one BASE and print its verdict with the evidence."""
    from courier.lab.supply import scale

    spec = _load(spec_path)
    chosen = topology or spec.topology

    def run(judge: scale.Judge, reporter: RichReporter) -> tuple[search.Point, Path]:
        options = _options(out, overwrite)
        return uvloop.run(scale.run_once(spec, chosen, base or spec.base, options, judge, reporter))

    point, directory, judged = _with_spark(f"{spec.name}-{chosen}", 1, run)
    _finish(directory, judged, [point], None)
    if point.valid is not True:
        raise SystemExit(1)


@lab.command(name="scale")
@spec_argument
@topology_option
@out_option
@overwrite_option
def scale_command(spec_path: Path, topology: str | None, out: Path, overwrite: bool) -> None:
    """Find the largest BASE at which the benchmark stays valid (grow, then bisect)."""
    from courier.lab.supply import scale

    spec = _load(spec_path)
    chosen = topology or spec.topology

    def run(judge: scale.Judge, reporter: RichReporter) -> tuple[search.Result, Path]:
        return uvloop.run(scale.run_search(spec, chosen, _options(out, overwrite), judge, reporter))

    name = f"{spec.name}-{chosen}"
    result, directory, judged = _with_spark(name, spec.search.max_runs, run)
    _finish(directory, judged, result.points, result)


def _load(spec_path: Path) -> Any:
    from courier.lab.supply import topology

    try:
        return topology.load(spec_path)
    except errors.CourierError as exc:
        raise click.ClickException(exc.message) from exc


def _options(out: Path, overwrite: bool) -> Any:
    from courier.lab import runner

    return runner.RunnerOptions(out=out, overwrite=overwrite)


def _with_spark(name: str, runs: int, run: Any) -> tuple[Any, Path, Any]:
    """Start Spark, run with a judge on it and a progress bar; the outcome, the
    experiment directory and every run's judgement merged."""
    from courier.analysis import benchmark, session

    judgements: list[benchmark.Judgement] = []
    reporter = RichReporter(name, runs)
    signal.signal(signal.SIGTERM, interrupt)
    try:
        with session.opened() as spark, reporter:
            outcome, directory = run(_judge(spark, judgements), reporter)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted: every process the runner started is stopped")
        raise SystemExit(130) from None
    except (errors.CourierError, OSError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from exc
    return outcome, directory, benchmark.merge(judgements)


def _judge(spark: SparkSession, judgements: list[Any]) -> Any:
    from courier.analysis import benchmark

    def judge(directory: Path, run_id: str, base: int) -> search.Point:
        judged = benchmark.judge(spark, directory, [run_id])
        judgements.append(judged)
        verdict = judged.verdicts[run_id]
        p90 = {row["name"]: row["p90_ms"] for row in judged.interactions.where(run_id=run_id)}
        console.print(_verdict_line(base, run_id, verdict.valid))
        for line in verdict.failing:
            console.print(f"    {line}")
        return search.Point(base, run_id, verdict.valid, verdict.failing, p90)

    return judge


def _verdict_line(base: int, run_id: str, valid: bool | None) -> str:
    word = {True: "[green]valid", False: "[red]invalid", None: "[yellow]undecided"}[valid]
    return f"{run_id} BASE {base}: {word}[/]"


def _finish(
    directory: Path, judged: Any, points: list[search.Point], result: search.Result | None
) -> None:
    """Print the evidence and the runs, write the tables and the search plot."""
    from courier.analysis import benchmark, benchmark_plot, plots

    evidence = directory / EVIDENCE_DIR
    benchmark.write(judged, evidence)
    console.print(_interaction_table(judged))
    console.print(_modes_line(judged))
    console.print(_runs_table(points))
    if result is None:
        console.print(f"evidence: {evidence}")
        return
    metric = result.metric
    title = (
        f"{directory.name}: metric BASE {metric}" if metric else f"{directory.name}: no valid BASE"
    )
    figure = benchmark_plot.search_figure(judged.interactions, judged.verdicts, metric, title)
    plots.save(figure, evidence, "search")
    settled = "" if result.settled else " (the run limit ended the search before it closed in)"
    console.print(f"[bold]metric: BASE {metric if metric else 'none'}[/]{settled}")
    console.print(f"evidence and plot: {evidence}")


def _interaction_table(judged: Any) -> Table:
    table = Table("run", "BASE", "interaction", "delivered", "late", "p90 ms (95% CI)", "≤ 5 s")
    for row in judged.interactions.records():
        p90 = "—" if row["p90_ms"] is None else (
            f"{row['p90_ms']:,.1f} ({row['p90_low']:,.1f} to {row['p90_high']:,.1f})"
        )  # fmt: skip
        share = "—" if row["on_time_share"] is None else f"{row['on_time_share']:.1%}"
        table.add_row(row["run_id"], str(row["base"]), f"{row['interaction']} {row['name']}",
                      str(row["delivered"]), str(row["late_backlog"]), p90, share)  # fmt: skip
    return table


def _modes_line(judged: Any) -> str:
    durable_anyway = [
        row["kind"] for row in judged.kinds.records()
        if not row["persistent"] and row["ran_persistent"]
    ]  # fmt: skip
    if not durable_anyway:
        return "delivery modes: every kind ran in its own mode"
    return (
        "[yellow]delivery modes: this build stores every message durably; non-persistent "
        f"kinds ran persistent: {', '.join(durable_anyway)}"
    )


def _runs_table(points: list[search.Point]) -> Table:
    table = Table("run", "BASE", "valid", "worst p90 ms", "failing evidence", title="runs")
    for point in sorted(points, key=lambda p: p.base):
        worst = max((p for p in point.p90_ms.values() if p is not None), default=None)
        valid = {True: "yes", False: "no", None: "undecided"}[point.valid]
        shown = "—" if worst is None else f"{worst:,.1f}"
        table.add_row(point.run_id, str(point.base), valid, shown, "\n".join(point.failing))
    return table
