"""`courier controller`: provision the members of replicated queues by their load.

    courier controller [--interval 1] [--capacity 8] [--high 1.0] [--low 0.5]
                       [--inhibition 10] [--move-above 100] [--move-at-most 1000]
                       [--record-dir DIR --run-id ID]

It talks to the control node (--dsn, else the database of `courier up`) and to
every node it lists, until Ctrl-C or SIGTERM. A cluster has one: a second one
refuses to start. The rules are in courier.controller and docs/nodes.md.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path

import click

from courier import controller as control
from courier.cli import common
from courier.cli.node_commands import control_dsn, dsn_option
from courier.cli.options import data_dir_option
from courier.measurements import parquet, record_schema

KINDS = (record_schema.REPLICA_SAMPLES, record_schema.CLUSTER_DECISIONS)
DEFAULTS = control.Rules()


@click.command(cls=common.Command)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.1),
    default=1.0,
    show_default=True,
    help="Seconds between two rounds.",
)
@click.option(
    "--capacity",
    type=click.IntRange(min=1),
    default=DEFAULTS.capacity,
    show_default=True,
    help="Clients a member serves well, for nodes without one.",
)
@click.option(
    "--high",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULTS.high,
    show_default=True,
    help="Add a member when the load exceeds this.",
)
@click.option(
    "--low",
    type=click.FloatRange(min=0),
    default=DEFAULTS.low,
    show_default=True,
    help="Remove one when the load without it stays below this.",
)
@click.option(
    "--inhibition",
    type=click.FloatRange(min=0),
    default=DEFAULTS.inhibition_s,
    show_default=True,
    help="Seconds without a change after each change.",
)
@click.option(
    "--move-above",
    type=click.IntRange(min=1),
    default=DEFAULTS.move_above,
    show_default=True,
    help="Even out members whose lengths differ by more.",
)
@click.option(
    "--move-at-most",
    type=click.IntRange(min=1),
    default=DEFAULTS.move_at_most,
    show_default=True,
    help="Messages moved per queue and round.",
)
@click.option(
    "--record-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Write member samples and decisions as lab records here.",
)
@click.option(
    "--run-id", default="controller", show_default=True, help="The run id of the records."
)
@dsn_option
@data_dir_option
def controller(
    interval: float,
    capacity: int,
    high: float,
    low: float,
    inhibition: float,
    move_above: int,
    move_at_most: int,
    record_dir: Path | None,
    run_id: str,
    dsn: str | None,
    data_dir: Path,
) -> None:
    """Add, remove and even out the members of replicated queues as the load asks."""
    if low >= high:
        raise click.BadParameter("--low must be below --high", param_hint="--low")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    rules = control.Rules(capacity, high, low, inhibition, move_above, move_at_most)
    asyncio.run(_run(control_dsn(dsn, data_dir), rules, interval, record_dir, run_id))


async def _run(
    dsn: str, rules: control.Rules, interval: float, record_dir: Path | None, run_id: str
) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    writer = None
    if record_dir is not None:
        writer = parquet.RecordWriter(record_dir / run_id, "controller", KINDS).start()
    running = control.Controller(
        dsn, rules, recorder=writer.append if writer else None, run_id=run_id
    )
    await running.start()
    common.note(f"controller running: a round every {interval:g} s (Ctrl-C stops it)")
    try:
        await running.run(interval, stop)
    finally:
        await running.close()
        if writer is not None:
            writer.close()
