"""A recorded middleware instance: what `courier serve --record-dir DIR --run-id ID` runs.

``run(settings)`` serves like ``courier.server.app.run`` and, when
``settings.record_dir`` is set, records every request (SERVER_REQUESTS), the
process's CPU and memory (RESOURCES) and its GC pauses (GC_PAUSES) into
``<record_dir>/<kind>/<host>_<port>-<n>.parquet``, finishing the files when the
server stops (SIGTERM or Ctrl-C).

``python -m courier.lab.middleware`` is the same with the few flags the runner
uses; the runner falls back to it while `courier serve` lacks ``--record-dir``.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from courier import config
from courier.lab import recording

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def instance_name(settings: config.ServerSettings) -> str:
    return f"{settings.host}:{settings.port}"


def run(settings: config.ServerSettings, *, clock_offset_ns: int = 0) -> None:
    """Serve until SIGTERM/SIGINT, recording when ``settings.record_dir`` is set."""
    from courier.server import app  # the server is imported only when serving

    if settings.record_dir is None:
        app.run(settings)
        return
    recorded = recording.ProcessRecording.for_middleware(
        settings.record_dir,
        settings.run_id,
        instance_name(settings),
        clock_offset_ns=clock_offset_ns,
    )
    try:
        app.run(settings, recorded.server_recorder())
    finally:
        recorded.close()


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m courier.lab.middleware")
    parser.add_argument("--dsn", default="")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=config.DEFAULT_PORT)
    parser.add_argument("--max-clients", type=int, default=256)
    parser.add_argument("--pool-size", type=int, default=10)
    parser.add_argument("--mock", action="store_true")
    parser.add_argument("--record-dir", type=Path, default=None)
    parser.add_argument("--run-id", default="")
    parser.add_argument("--log-level", default="INFO")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = _arguments(argv)
    logging.basicConfig(level=args.log_level.upper(), format=LOG_FORMAT)
    settings = config.ServerSettings(
        dsn=args.dsn,
        host=args.host,
        port=args.port,
        max_clients=args.max_clients,
        pool=config.PoolSettings(min_size=min(2, args.pool_size), max_size=args.pool_size),
        mock=args.mock,
        record_dir=args.record_dir,
        run_id=args.run_id,
    )
    run(settings)


if __name__ == "__main__":
    main()
