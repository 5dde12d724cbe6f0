"""Settings, resolved once at an entry point and passed down explicitly.

Precedence: command-line flags > COURIER_* environment variables > courier.toml >
the defaults below. The CLI (click, with ``auto_envvar_prefix="COURIER"``) applies
the first two (``cli.options`` states the naming rule); ``load_toml`` supplies the
third as click's ``default_map``. Otherwise only ``localstate`` reads the
environment (XDG_DATA_HOME, for the default data dir).

    >>> ServerSettings(port=7001).max_clients
    256
"""

from __future__ import annotations

import tomllib
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_PORT = 7400
DEFAULT_CONSOLE_PORT = 8080
DEFAULT_MAX_BODY_BYTES = 64 * 1024
DEFAULT_FRAME_TIMEOUT = 10.0
DEFAULT_LOGIN_TIMEOUT = 10.0
DEFAULT_IDLE_TIMEOUT = 60.0
CONFIG_FILE_NAME = "courier.toml"


@dataclass(frozen=True, slots=True)
class Limits:
    """Sizes the server enforces on what clients send."""

    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    dedup_window: float = 300.0
    """Seconds a send's dedup id is remembered: a retry within it stores nothing."""
    max_queues_per_send: int = 64
    """Queues one SEND may name (each gets its own copy of the message)."""
    max_queues_per_client: int = 1000
    """Queues one client may create; more is QUOTA_EXCEEDED until it deletes one."""
    max_wait: float = 3600.0
    """Seconds a RECEIVE, RECEIVE_MANY or AWAIT_RESPONSE may ask to wait."""
    max_waits_per_connection: int = 64
    """RECEIVE, RECEIVE_MANY and AWAIT_RESPONSE requests one connection may have
    waiting at once."""
    max_batch_bytes: int = 1024 * 1024
    """Bytes of message bodies one SEND_MANY may carry, and one RECEIVE_MANY answer
    (at least one message always goes, however large); also one transaction."""
    max_transaction_operations: int = 100
    """Sends, publishes and acks one transaction may carry."""
    max_transaction_age: float = 60.0
    """Seconds a transaction may stay open before its COMMIT; an older one is refused."""


@dataclass(frozen=True, slots=True)
class PoolSettings:
    """The asyncpg connection pool of one middleware instance."""

    min_size: int = 2
    max_size: int = 10
    acquire_timeout: float = 10.0
    """Seconds a request waits for a free connection; then UNAVAILABLE."""
    statement_timeout: float = 60.0
    """Seconds a stored-function call may take; then it is cancelled and UNAVAILABLE."""


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """One middleware instance (`courier serve`)."""

    dsn: str = ""
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    max_clients: int = 256  # logged-in connections
    max_anonymous: int = 64  # connections that have not logged in (the oldest make room)
    pool: PoolSettings = field(default_factory=PoolSettings)
    limits: Limits = field(default_factory=Limits)
    heartbeat_interval: float = 2.0
    notify_check: float = 5.0  # seconds between checks that the LISTEN link answers
    instance_ttl: float = 10.0
    frame_timeout: float = DEFAULT_FRAME_TIMEOUT  # seconds to send a frame once it has begun
    login_timeout: float = DEFAULT_LOGIN_TIMEOUT  # seconds a connection may stay anonymous
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT  # seconds a logged-in client may send nothing
    mock: bool = False
    batching: bool = True  # coalesce concurrent sends and reads into batched calls
    # Logins without a secret (the lab's private systems on loopback only).
    open_login: bool = False
    max_login_failures: int = 5  # failed logins per name or address before a lockout
    record_dir: Path | None = None
    run_id: str = ""
    tls: TlsFiles | None = None  # None serves plaintext
    metrics_host: str = "127.0.0.1"
    metrics_port: int | None = None  # None serves no metrics
    # The lab's stand-in for a slower database server: each node serves this
    # middleware's requests one at a time, each taking at least this long (0: off).
    node_service_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """A server's certificate chain and private key, both PEM files."""

    cert: Path
    key: Path


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """How a client library instance reaches the middleware."""

    servers: tuple[tuple[str, int], ...] = (("127.0.0.1", DEFAULT_PORT),)
    connect_timeout: float = 5.0


def parse_servers(text: str) -> tuple[tuple[str, int], ...]:
    """Parse ``host:port,host:port`` into address pairs; a bare port means 127.0.0.1.

    >>> parse_servers("127.0.0.1:7400,localhost:7401")
    (('127.0.0.1', 7400), ('localhost', 7401))
    """
    servers = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        host, _, port = item.rpartition(":")
        servers.append((host or "127.0.0.1", int(port)))
    if not servers:
        raise ValueError("no server address given")
    return tuple(servers)


def redact_dsn(dsn: str) -> str:
    """The DSN with its password masked, for terminals and logs, which get shared.

    >>> redact_dsn("postgresql://postgres:s3cret@127.0.0.1:41234/courier")
    'postgresql://postgres:***@127.0.0.1:41234/courier'
    """
    parts = urllib.parse.urlsplit(dsn)
    netloc = parts.netloc
    if parts.password is not None:
        userinfo, _, address = netloc.rpartition("@")
        netloc = f"{userinfo.partition(':')[0]}:***@{address}"
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    if any(key == "password" for key, _ in query):  # libpq's other place for it
        masked = [(key, "***" if key == "password" else value) for key, value in query]
        parts = parts._replace(query=urllib.parse.urlencode(masked, safe="*"))
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def load_toml(path: Path | None) -> dict[str, Any]:
    """Read courier.toml (or the given file) as click's default_map; missing is empty."""
    candidate = path or Path.cwd() / CONFIG_FILE_NAME
    if not candidate.is_file():
        return {}
    with candidate.open("rb") as handle:
        return tomllib.load(handle)
