"""`courier demo`: the whole product in one command (what `make demo` runs).

It runs the demo experiment (a fresh embedded database, two middleware, 32 clients
on the standard workload for about a minute), then the Spark pipeline over it, and
says where the report is. Both steps are the ordinary `courier lab run` and
`courier analyze` commands.
"""

from __future__ import annotations

from pathlib import Path

import click

DEFAULT_SPEC = Path("experiments/demo.toml")


@click.command()
@click.option(
    "--spec",
    type=click.Path(dir_okay=False, path_type=Path),
    default=DEFAULT_SPEC,
    show_default=True,
    help="Experiment to run.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("experiments"),
    show_default=True,
    help="Experiments directory.",
)
@click.pass_context
def demo(ctx: click.Context, spec: Path, out: Path) -> None:
    """Run the demo experiment, analyse it, and say where the report is."""
    from courier.cli import analyze, lab
    from courier.lab import spec as experiment

    if not spec.is_file():
        raise click.ClickException(f"{spec} not found: run this from the repository root")
    name = experiment.load(spec).name
    click.secho(f"1/2  running experiment {name} ({spec})", bold=True, err=True)
    ctx.invoke(lab.run, spec_path=spec, out=out, overwrite=True)
    click.secho(f"2/2  analysing {out / name} on Spark", bold=True, err=True)
    ctx.invoke(analyze.analyze, experiment_dir=out / name)
    report = (out / name / "report" / "index.html").resolve()
    click.secho(f"\nThe report is at {report}", fg="green", bold=True)
    click.echo(f"Open it with:  xdg-open {report}")
