"""This machine's Courier: the data dir and what lives in it, found one way by every command.

    <data dir>          --data-dir > COURIER_DATA_DIR > $XDG_DATA_HOME/courier
    ├── pg/             the embedded PostgreSQL cluster (`courier db`, `courier up`)
    ├── pg.secret       its password (mode 0600; `courier db url` prints the DSN with it)
    ├── pg-node2/ ...   the other database nodes of `courier up --nodes K` (and their
    │                   pg-node2.secret ...), the k-th in pg-nodek/
    ├── logs/           the logs of the middleware `courier up` started
    ├── up.json         the system `courier up` runs: DSN (password included), servers,
    │                   pids, admin token, and with --tls the CA clients trust
    ├── tls/            `courier up --tls`'s local CA and server certificate (keys 0600)
    └── shell_history   the history of `courier shell`

The CLI resolves the flag and the environment variable (click does); this module
supplies the default and reads and writes what is there.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from courier import config, files
from courier.db import embedded

UP_STATE_FILE = "up.json"
CLUSTER_DIR = "pg"
NODE_CLUSTER_DIR = "pg-node{}"
LOGS_DIR = "logs"
TLS_DIR = "tls"
SHELL_HISTORY_FILE = "shell_history"


def data_dir(given: Path | None = None) -> Path:
    """The data dir: ``given`` (the flag or COURIER_DATA_DIR), else the per-user default."""
    if given is None:
        xdg = os.environ.get("XDG_DATA_HOME")
        given = (Path(xdg) if xdg else Path.home() / ".local" / "share") / "courier"
    return given.expanduser().absolute()


def embedded_database(home: Path) -> embedded.EmbeddedPostgres:
    """The embedded cluster of this data dir (it may not exist yet)."""
    return embedded.EmbeddedPostgres(home / CLUSTER_DIR)


def node_database(home: Path, k: int) -> embedded.EmbeddedPostgres:
    """The k-th embedded cluster of this data dir: the first is ``pg/``, the control
    node; `courier up --nodes K` runs the first K."""
    if k == 1:
        return embedded_database(home)
    return embedded.EmbeddedPostgres(home / NODE_CLUSTER_DIR.format(k))


@dataclass(frozen=True, slots=True)
class UpState:
    """What `courier up` records about the system it started."""

    dsn: str
    servers: list[str]  # host:port of each middleware
    pids: list[int]
    admin_token: str
    ca: str = ""  # the CA certificate the servers' TLS certificate chains to; "" if plaintext


def read_up_state(home: Path) -> UpState | None:
    """The system `courier up` recorded in this data dir, or None."""
    try:
        found = json.loads((home / UP_STATE_FILE).read_text())
        return UpState(
            dsn=str(found["dsn"]),
            servers=[str(server) for server in found["servers"]],
            pids=[int(pid) for pid in found["pids"]],
            admin_token=str(found["admin_token"]),
            ca=str(found.get("ca") or ""),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_up_state(home: Path, state: UpState) -> None:
    """Record the system, replacing the file whole: a reader never sees half of it.

    The console's admin token is in it, so only this user may read it.
    """
    home.mkdir(parents=True, exist_ok=True)
    files.write_private(home / UP_STATE_FILE, json.dumps(asdict(state), indent=2))


def clear_up_state(home: Path) -> None:
    (home / UP_STATE_FILE).unlink(missing_ok=True)


def local_dsn(home: Path) -> str | None:
    """The running local database: `courier up`'s, else the running embedded cluster."""
    state = read_up_state(home)
    if state is not None and state.dsn:
        return state.dsn
    database = embedded_database(home)
    if database.status().state is not embedded.State.RUNNING:
        return None
    return database.dsn


def local_servers(home: Path) -> tuple[tuple[str, int], ...]:
    """The middleware `courier up` started, else the default server."""
    state = read_up_state(home)
    if state is None or not state.servers:
        return config.ClientSettings().servers
    try:
        return config.parse_servers(",".join(state.servers))
    except ValueError:
        return config.ClientSettings().servers


def local_ca(home: Path) -> Path | None:
    """The CA to trust for the middleware `courier up` started, if they speak TLS."""
    state = read_up_state(home)
    return Path(state.ca) if state is not None and state.ca else None
