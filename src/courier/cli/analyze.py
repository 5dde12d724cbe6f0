"""`courier analyze`: run the Spark pipeline over an experiment directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich import box
from rich import progress as rich_progress
from rich.console import Console
from rich.table import Table

from courier.analysis import errors as analysis_errors
from courier.analysis import trimming


def _parse_trim(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    if value is None:
        return None
    try:
        return trimming.parse(value)
    except analysis_errors.InvalidTrim as exc:
        raise click.BadParameter(str(exc)) from None


@click.command()
@click.argument("experiment_dir", type=click.Path(file_okay=False, path_type=Path), required=False)
@click.option(
    "--master",
    default="local[*]",
    show_default=True,
    help="Spark master URL, e.g. spark://host:7077 (files must be visible to every worker).",
)
@click.option(
    "--trim",
    callback=_parse_trim,
    metavar="START_S:END_S",
    help="Keep these seconds after each run's start (5:55, 5:-5, 5:) instead of the "
    "manifest's warm-up and cool-down.",
)
@click.option(
    "--window",
    type=click.FloatRange(min=0.001),
    default=5.0,
    show_default=True,
    help="Length of a time-trace window in seconds.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Report directory (default: EXPERIMENT_DIR/report).",
)
@click.option(
    "--compare",
    nargs=2,
    type=click.Path(file_okay=False, path_type=Path),
    metavar="A B",
    help="Analyse two experiments and compare B against A, per configuration: differences "
    "and their significance (--out: where the comparison goes, default ./compare-A-B).",
)
@click.option(
    "--exact-percentiles",
    is_flag=True,
    help="Exact percentiles (slower, memory-hungry on big runs) instead of approximate.",
)
def analyze(
    experiment_dir: Path | None,
    master: str,
    trim: trimming.FixedTrim | None,
    window: float,
    out: Path | None,
    compare: tuple[Path, Path] | None,
    exact_percentiles: bool,
) -> None:
    """Analyse EXPERIMENT_DIR and write its report (HTML, Markdown, plots, tables);
    or, with --compare A B, two experiments side by side."""
    if (experiment_dir is None) == (compare is None):
        raise click.UsageError("give EXPERIMENT_DIR, or --compare A B")
    if compare is not None:
        _compare(compare, master, trim, window, out, exact_percentiles)
        return
    assert experiment_dir is not None
    from courier.analysis import pipeline  # imports PySpark: only when used

    console = Console(stderr=True)
    with rich_progress.Progress(
        rich_progress.SpinnerColumn(),
        rich_progress.TextColumn("{task.description}"),
        rich_progress.BarColumn(),
        rich_progress.TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("Analysing", total=len(pipeline.STEPS))

        def advance(description: str, done: int, total: int) -> None:
            bar.update(task, description=description, completed=done, total=total)

        try:
            summary = pipeline.run(
                experiment_dir,
                master=master,
                trim=trim,
                window_s=window,
                out=out,
                exact_percentiles=exact_percentiles,
                progress=advance,
            )
        except analysis_errors.ExperimentError as exc:
            raise click.ClickException(str(exc)) from None
    Console().print(summary_table(summary))


def _compare(
    experiments: tuple[Path, Path],
    master: str,
    trim: trimming.FixedTrim | None,
    window: float,
    out: Path | None,
    exact: bool,
) -> None:
    from courier.analysis import comparison, pipeline, session

    first, second = experiments
    target = out or Path(f"compare-{first.name}-{second.name}")
    try:
        with session.opened(master) as spark:
            a, b = (
                pipeline.run(path, trim=trim, window_s=window, exact_percentiles=exact,
                             spark=spark)
                for path in experiments
            )  # fmt: skip
            found = comparison.compare(a, b, target)
    except analysis_errors.ExperimentError as exc:
        raise click.ClickException(str(exc)) from None
    Console().print(comparison_table(found.table, found.report_dir))


def comparison_table(table: Any, report_dir: Path) -> Table:
    shown = Table(box=box.SIMPLE_HEAD, title=f"{table.title}: {report_dir / 'index.html'}")
    for column in ("config", "metric", "A", "B", "B - A", "change", "significant"):
        shown.add_column(column, justify="left" if column in ("config", "metric") else "right")
    for row in table.records():
        change = row["change_percent"]
        shown.add_row(
            row["config"], row["metric"], _number(row["a"]), _number(row["b"]),
            _number(row["difference"]), "-" if change is None else f"{change:+.1f}%",
            {True: "[bold]yes", False: "no", None: "-"}[row["significant"]],
        )  # fmt: skip
    return shown


def summary_table(summary: Any) -> Table:
    """The closing table: one row per run, a verdict column only for saturation runs."""
    judging = any(run["judged"] for run in summary.runs)
    caption = (
        f"{summary.records:,} records in {summary.elapsed_s:.1f} s "
        f"({summary.records_per_second:,.0f} records/s)"
    )
    if judging:
        caption += "\nvalid: saturation-run verdict; — closed loop, not judged; ? no depth data"
    table = Table(
        box=box.SIMPLE_HEAD,
        title=f"{summary.experiment}: report in {summary.report_dir}",
        caption=caption,
    )
    table.add_column("run", no_wrap=True)
    table.add_column("config", min_width=14)
    names = ("requests", "errors", "req/s", "mean ms", "p99 ms", *(("valid",) if judging else ()))
    for name in names:
        table.add_column(name, justify="right", no_wrap=True, min_width=len(name))
    for run in summary.runs:
        cells = [
            f"{run['requests']:,}",
            f"{run['errors']:,}",
            _number(run["throughput"]),
            _number(run["mean_ms"]),
            _number(run["p99_ms"]),
        ]
        if judging:
            cells.append(_verdict(run))
        table.add_row(run["run_id"], run["config"], *cells)
    return table


def _verdict(run: dict[str, Any]) -> str:
    if not run["judged"]:
        return "[dim]—"  # closed loop: not a saturation run
    return {True: "[green]yes", False: "[red]no", None: "?"}[run["valid"]]


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:,.3g}" if abs(value) < 100 else f"{value:,.0f}"
