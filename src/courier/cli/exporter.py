"""`courier exporter`: serve the database's queue depths and ages to Prometheus.

One exporter per database (not one per middleware): it reads the database every
--interval seconds and serves the last numbers on http://HOST:PORT/metrics. Every
option is also an environment variable (COURIER_EXPORTER_PORT, ...; the DSN also
as COURIER_DSN).
"""

from __future__ import annotations

import logging
from pathlib import Path

import click

from courier import errors, localstate
from courier.cli.options import data_dir_option, shared_option

DEFAULT_PORT = 9465
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


@click.command()
@shared_option(
    "--dsn", shared_envvar="COURIER_DSN", default=None,
    help="PostgreSQL DSN (default: the local database of `courier up` / `courier db start`).",
)  # fmt: skip
@data_dir_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True,
    help="HTTP port of /metrics (0 picks a free one).",
)  # fmt: skip
@click.option(
    "--interval", type=click.FloatRange(min=0.1), default=15.0, show_default=True,
    help="Seconds between reads of the database.",
)  # fmt: skip
@click.option(
    "--max-queues", type=click.IntRange(min=1), default=10_000, show_default=True,
    help="Queues reported at most (in id order): bounds each read.",
)  # fmt: skip
@click.option(
    "--count-cap", type=click.IntRange(min=1), default=1_000_000, show_default=True,
    help="Messages counted per queue at most: bounds each read.",
)  # fmt: skip
@click.option("--log-level", default="INFO", show_default=True, help="DEBUG, INFO, WARNING, ...")
def exporter(
    dsn: str | None,
    data_dir: Path,
    host: str,
    port: int,
    interval: float,
    max_queues: int,
    count_cap: int,
    log_level: str,
) -> None:
    """Serve queue depths and ages from the database as Prometheus metrics."""
    from courier import exporter as exporting  # imported here: `--help` stays quick

    logging.basicConfig(level=log_level.upper(), format=LOG_FORMAT)
    dsn = dsn or localstate.local_dsn(data_dir)
    if dsn is None:
        raise click.UsageError("give --dsn, or start a local database with `courier up`")
    settings = exporting.ExporterSettings(interval, count_cap, max_queues)
    try:
        exporting.run(dsn, host, port, settings)
    except errors.CourierError as exc:
        raise click.ClickException(exc.message) from exc
    except OSError as exc:
        raise click.ClickException(f"cannot serve on {host}:{port}: {exc}") from exc
