"""`courier serve`: run one middleware instance until SIGTERM or Ctrl-C.

Every option is also an environment variable (COURIER_SERVE_PORT,
COURIER_SERVE_TLS_CERT, ...; the DSN also as COURIER_DSN). Without --dsn the
instance uses the local database that `courier up` or `courier db start` left
running.
"""

from __future__ import annotations

import ipaddress
import logging
from pathlib import Path

import click

from courier import config, errors, localstate, protocol
from courier.cli.options import data_dir_option, shared_option

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
DEFAULTS = config.ServerSettings()


@click.command()
@shared_option(
    "--dsn",
    shared_envvar="COURIER_DSN",
    default=None,
    help="PostgreSQL DSN (default: the local database of `courier up` / `courier db start`).",
)
@data_dir_option
@click.option("--host", default=DEFAULTS.host, show_default=True, help="Address to listen on.")
@click.option("--port", default=DEFAULTS.port, show_default=True, help="0 picks a free port.")
@click.option(
    "--max-clients",
    type=click.IntRange(min=1),
    default=DEFAULTS.max_clients,
    show_default=True,
    help="Clients logged in at once; a LOGIN beyond them is answered SERVER_FULL.",
)
@click.option(
    "--max-anonymous",
    type=click.IntRange(min=1),
    default=DEFAULTS.max_anonymous,
    show_default=True,
    help="Connections kept that have not logged in; a newcomer beyond them pushes out the oldest.",
)
@click.option(
    "--idle-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULTS.idle_timeout,
    show_default=True,
    help="Seconds a logged-in client may send nothing (the Courier client PINGs when"
    " idle) before it is taken for dead: its session and leases are released.",
)
@click.option(
    "--login-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULTS.login_timeout,
    show_default=True,
    help="Seconds a connection may stay open without logging in.",
)
@click.option(
    "--pool-size", default=DEFAULTS.pool.max_size, show_default=True, help="Database connections."
)
@click.option(
    "--pool-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULTS.pool.acquire_timeout,
    show_default=True,
    help="Seconds a request waits for a free database connection (then UNAVAILABLE).",
)
@click.option(
    "--statement-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULTS.pool.statement_timeout,
    show_default=True,
    help="Seconds a database call may take before it is cancelled (then UNAVAILABLE).",
)
@click.option(
    "--max-body-bytes",
    default=DEFAULTS.limits.max_body_bytes,
    show_default=True,
    help="Largest message body accepted.",
)
@click.option(
    "--max-queues-per-send",
    type=click.IntRange(min=1, max=65535),
    default=DEFAULTS.limits.max_queues_per_send,
    show_default=True,
    help="Queues one send may name.",
)
@click.option(
    "--max-queues-per-client",
    type=click.IntRange(min=1),
    default=DEFAULTS.limits.max_queues_per_client,
    show_default=True,
    help="Queues one client may create; more is QUOTA_EXCEEDED until it deletes one.",
)
@click.option(
    "--max-wait",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULTS.limits.max_wait,
    show_default=True,
    help="Seconds a receive or a wait for a response may ask to wait.",
)
@click.option(
    "--max-waits-per-connection",
    type=click.IntRange(min=1),
    default=DEFAULTS.limits.max_waits_per_connection,
    show_default=True,
    help="Receives and waits for a response one connection may have waiting at once.",
)
@click.option(
    "--max-batch-bytes",
    type=click.IntRange(min=1),
    default=DEFAULTS.limits.max_batch_bytes,
    show_default=True,
    help="Bytes of bodies one batch send may carry, and one batch read answer.",
)
@click.option(
    "--max-transaction-operations",
    type=click.IntRange(min=1, max=protocol.MAX_TRANSACTION_OPERATIONS),
    default=DEFAULTS.limits.max_transaction_operations,
    show_default=True,
    help="Sends, publishes and acks one transaction may carry.",
)
@click.option(
    "--max-transaction-age",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULTS.limits.max_transaction_age,
    show_default=True,
    help="Seconds a transaction may stay open; an older one is refused at its commit.",
)
@click.option(
    "--dedup-window",
    default=DEFAULTS.limits.dedup_window,
    show_default=True,
    help="Seconds a send's dedup id is remembered: a retry within it stores nothing.",
)
@click.option(
    "--heartbeat-interval", default=DEFAULTS.heartbeat_interval, show_default=True, help="Seconds."
)
@click.option(
    "--notify-check",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULTS.notify_check,
    show_default=True,
    help="Seconds between checks that the database's notification link still answers;"
    " a link silent that long is reconnected and every waiting receive looks again.",
)
@click.option(
    "--instance-ttl",
    default=DEFAULTS.instance_ttl,
    show_default=True,
    help="Seconds of silence after which an instance counts as dead.",
)
@click.option(
    "--frame-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULTS.frame_timeout,
    show_default=True,
    help="Seconds a client may take to send a frame once it has begun (then it is"
    " dropped), and to take its last replies when its connection closes.",
)
@click.option("--mock", is_flag=True, help="Answer every request with a fixed result; no database.")
@click.option(
    "--open-login",
    is_flag=True,
    help="Let clients log in by name alone, without a secret: only for a private system on"
    " a loopback address (the lab's); refused on any other host.",
)
@click.option(
    "--max-login-failures",
    type=click.IntRange(min=1),
    default=DEFAULTS.max_login_failures,
    show_default=True,
    help="Failed logins for one client name, or from one address, before further logins"
    " are refused for a while (1 s, doubling with each further failure, at most 5 min).",
)
@click.option(
    "--batching/--no-batching",
    default=DEFAULTS.batching,
    show_default=True,
    help="Coalesce the sends and reads that arrive together into one database call.",
)
@click.option(
    "--node-service-ms",
    type=click.FloatRange(min=0),
    default=DEFAULTS.node_service_ms,
    show_default=True,
    help="The lab's capacity stand-in: each database node serves this middleware's"
    " requests one at a time, each taking at least this long (0: off).",
)
@click.option(
    "--record-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Record every request (the lab's measurement records) under this directory.",
)
@click.option("--run-id", default="", help="Run id written into the records.")
@click.option(
    "--tls-cert",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="Serve TLS only (1.2 or later) with this PEM certificate chain; needs --tls-key.",
)
@click.option(
    "--tls-key",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="The PEM private key of --tls-cert.",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(min=0, max=65535),
    default=None,
    help="Serve Prometheus metrics over HTTP on this port (default: none; 0 picks a free one).",
)
@click.option(
    "--metrics-host",
    default=DEFAULTS.metrics_host,
    show_default=True,
    help="Address the metrics endpoint listens on.",
)
@click.option("--log-level", default="INFO", show_default=True, help="DEBUG, INFO, WARNING, ...")
def serve(
    dsn: str | None,
    data_dir: Path,
    host: str,
    port: int,
    max_clients: int,
    max_anonymous: int,
    idle_timeout: float,
    login_timeout: float,
    pool_size: int,
    pool_timeout: float,
    statement_timeout: float,
    max_body_bytes: int,
    max_queues_per_send: int,
    max_queues_per_client: int,
    max_wait: float,
    max_waits_per_connection: int,
    max_batch_bytes: int,
    max_transaction_operations: int,
    max_transaction_age: float,
    dedup_window: float,
    heartbeat_interval: float,
    notify_check: float,
    instance_ttl: float,
    frame_timeout: float,
    mock: bool,
    open_login: bool,
    max_login_failures: int,
    batching: bool,
    node_service_ms: float,
    record_dir: Path | None,
    run_id: str,
    tls_cert: Path | None,
    tls_key: Path | None,
    metrics_port: int | None,
    metrics_host: str,
    log_level: str,
) -> None:
    """Run one middleware instance."""
    logging.basicConfig(level=log_level.upper(), format=LOG_FORMAT)
    if not dsn and not mock:
        dsn = localstate.local_dsn(data_dir)
        if dsn is None:
            raise click.UsageError("give --dsn, or start a local database with `courier up`")
    if open_login and not is_loopback(host):
        raise click.UsageError(f"--open-login serves loopback addresses only, not {host}")
    settings = config.ServerSettings(
        dsn=dsn or "",
        host=host,
        port=port,
        max_clients=max_clients,
        max_anonymous=max_anonymous,
        login_timeout=login_timeout,
        idle_timeout=idle_timeout,
        pool=config.PoolSettings(
            min_size=min(2, pool_size),
            max_size=pool_size,
            acquire_timeout=pool_timeout,
            statement_timeout=statement_timeout,
        ),
        limits=config.Limits(
            max_body_bytes=max_body_bytes,
            dedup_window=dedup_window,
            max_queues_per_send=max_queues_per_send,
            max_queues_per_client=max_queues_per_client,
            max_wait=max_wait,
            max_waits_per_connection=max_waits_per_connection,
            max_batch_bytes=max_batch_bytes,
            max_transaction_operations=max_transaction_operations,
            max_transaction_age=max_transaction_age,
        ),
        heartbeat_interval=heartbeat_interval,
        notify_check=notify_check,
        instance_ttl=instance_ttl,
        frame_timeout=frame_timeout,
        mock=mock,
        open_login=open_login,
        max_login_failures=max_login_failures,
        batching=batching,
        node_service_ms=node_service_ms,
        record_dir=record_dir,
        run_id=run_id,
        tls=tls_files(tls_cert, tls_key),
        metrics_host=metrics_host,
        metrics_port=metrics_port,
    )
    try:
        run(settings)
    except errors.CourierError as exc:
        raise click.ClickException(exc.message) from exc
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc}") from exc


def tls_files(cert: Path | None, key: Path | None) -> config.TlsFiles | None:
    """Both files or neither: half a TLS setup is a mistake, not plaintext."""
    if (cert is None) != (key is None):
        raise click.UsageError("--tls-cert and --tls-key go together")
    return config.TlsFiles(cert, key) if cert is not None and key is not None else None


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address or ``localhost``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run(settings: config.ServerSettings) -> None:
    # Imported here so that `courier serve --help` stays quick.
    from courier.server import app

    if settings.record_dir is None:
        app.run(settings)
        return
    from courier.lab import process_recording  # the lab adds a recorder; the server is the same

    instance = f"{settings.host}:{settings.port}"
    with process_recording.ProcessRecording.for_middleware(
        settings.record_dir, settings.run_id, instance
    ) as recorded:
        app.run(settings, recorded.server_recorder())


if __name__ == "__main__":
    serve(auto_envvar_prefix="COURIER_SERVE")
