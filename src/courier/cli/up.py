"""`courier up`: a whole local system in one command, stopped with Ctrl-C.

Starts the embedded database (initialising and migrating it on first use), with
--nodes K also K - 1 more as the other nodes of a cluster (``<data dir>/pg-node2`` ...,
made nodes the first time, found again afterwards), then
N `courier serve` processes on consecutive ports, waits until each answers a PING,
and records the system in ``<data dir>/up.json`` so that client commands and the
console find it without flags. It makes the admin client ``admin`` (or gives the one
there a new secret) and keeps its secret in ``<data dir>/credentials.json`` (0600).
On Ctrl-C or SIGTERM it stops the middleware, then the databases in reverse order
(except those already running before), and removes the state file.

With --tls the middleware speak TLS with a certificate from a CA made for this run
(in ``<data dir>/tls``); up.json names the CA, and client commands against this
system trust it.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
from pathlib import Path

import click

from courier import certificates, config, credentials, errors, localstate, models, scram
from courier.cli.options import data_dir_option
from courier.db import embedded, nodes, repository
from courier.server import launcher
from courier.server.launcher import Middleware

STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}
ADMIN_CLIENT = "admin"
"""The admin client `courier up` makes (or gives a new secret, if it exists)."""


@click.command()
@click.option(
    "--middlewares",
    type=int,
    default=None,
    help="Middleware processes to run (default: one per node).",
)
@click.option("--port", default=config.DEFAULT_PORT, show_default=True, help="Port of the first.")
@click.option(
    "--nodes",
    type=click.IntRange(1, nodes.MAX_NODES),
    default=1,
    show_default=True,
    help="Database nodes to run, each an embedded PostgreSQL; queues spread over them.",
)
@click.option(
    "--tls",
    is_flag=True,
    help="Speak TLS: make a local CA and a certificate for 127.0.0.1/localhost; client"
    " commands against this system use it by themselves.",
)
@data_dir_option
def up(middlewares: int | None, port: int, nodes: int, tls: bool, data_dir: Path) -> None:
    """Start the database(s) and N middleware servers; Ctrl-C stops them all."""
    # `nodes` (the option, named by its flag as the environment-variable rule asks)
    # hides the module of that name in here; join_nodes uses the module.
    middlewares = nodes if middlewares is None else middlewares
    if middlewares < 1:
        raise click.BadParameter("at least one", param_hint="--middlewares")
    refuse_if_already_up(data_dir)
    databases = [localstate.node_database(data_dir, k) for k in range(1, nodes + 1)]
    running_before = [
        database for database in databases
        if database.status().state is embedded.State.RUNNING
    ]  # fmt: skip
    servers: list[Middleware] = []
    try:
        click.echo("starting the database ...", err=True)
        dsn, *others = [start_database(database) for database in databases]
        joined = join_nodes(dsn, others)
        made = make_certificates(data_dir) if tls else None
        servers = start_middlewares(dsn, port, middlewares, data_dir / localstate.LOGS_DIR, made)
        admin_token = secrets.token_urlsafe(24)
        kept = credentials.save(data_dir, ADMIN_CLIENT, asyncio.run(admin_secret(dsn)))
        localstate.write_up_state(data_dir, up_state(dsn, servers, admin_token))
        announce_databases(databases, dsn, joined, running_before)
        announce(servers, admin_token)
        announce_login(kept)
        wait_for_stop(servers)
    finally:
        # A second Ctrl-C must not cut the clean-up short.
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)
        click.echo("stopping ...", err=True)
        launcher.stop_all(servers)
        stop_databases([each for each in reversed(databases) if each not in running_before])
        localstate.clear_up_state(data_dir)
    click.echo("stopped", err=True)


def join_nodes(control_dsn: str, others: list[str]) -> list[nodes.Node]:
    """Make the other databases nodes (those that are not yet), and record where each
    node is now: an embedded server may have another port than when it joined."""
    if not others:
        return []

    async def join() -> list[nodes.Node]:
        await nodes.move_node(control_dsn, nodes.CONTROL_NODE, control_dsn)
        return [await nodes.join(control_dsn, dsn) for dsn in others]

    try:
        return asyncio.run(join())
    except errors.CourierError as exc:
        raise click.ClickException(exc.message) from exc


def stop_databases(databases: list[embedded.EmbeddedPostgres]) -> None:
    """Stop each in turn; one that will not stop does not keep the others up."""
    for database in databases:
        try:
            database.stop()
        except embedded.EmbeddedError as exc:
            click.echo(f"error: {exc}", err=True)


async def admin_secret(dsn: str, name: str = "admin") -> str:
    """Make sure client ``name`` is an admin with a new secret; that secret."""
    secret = scram.new_secret()
    verifier = scram.verifier(secret)
    repo = await repository.Repository.connect(dsn, config.PoolSettings(min_size=1, max_size=1))
    try:
        try:
            await repo.register_client(name, models.ClientMode.ADMIN, verifier=verifier)
        except errors.ClientExists:
            found = await repo.get_client(name)
            if not await repo.is_admin(found.id):
                raise click.ClickException(
                    f"client {name!r} exists and is not an admin: cannot make it the admin"
                ) from None
            await repo.set_secret(found.id, found.id, verifier)
    finally:
        await repo.close()
    return secret


def announce_login(kept: Path) -> None:
    click.echo(
        f"admin client {ADMIN_CLIENT!r}: its secret is in {kept} (readable by you only);"
        f" log in with --as {ADMIN_CLIENT}"
    )
    click.echo("new clients: `courier register NAME` keeps their secret there too")


def start_database(database: embedded.EmbeddedPostgres) -> str:
    """Start (initialising and migrating on first use); returns the DSN."""
    try:
        return database.start()
    except embedded.EmbeddedError as exc:
        raise click.ClickException(str(exc)) from exc


def refuse_if_already_up(data_dir: Path) -> None:
    state = localstate.read_up_state(data_dir)
    if state is not None and any(is_alive(pid) for pid in state.pids):
        path = data_dir / localstate.UP_STATE_FILE
        raise click.ClickException(f"a system is already up (see {path})")


def is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def make_certificates(data_dir: Path) -> certificates.LocalCertificates:
    """A fresh local CA and server certificate in the data dir (only we may enter it)."""
    directory = data_dir / localstate.TLS_DIR
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    directory.chmod(0o700)
    return certificates.make_local(directory)


def start_middlewares(
    dsn: str,
    first_port: int,
    count: int,
    log_dir: Path,
    made: certificates.LocalCertificates | None = None,
) -> list[Middleware]:
    """Start ``count`` on consecutive ports (speaking TLS with ``made``); they take
    COURIER_SERVE_* settings too."""
    servers: list[Middleware] = []
    tls: dict[str, object] = {}
    if made is not None:
        tls = {"tls_cert": made.cert, "tls_key": made.key, "ca": made.ca}
    try:
        for n in range(count):
            servers.append(
                Middleware.start(
                    log_dir, port=first_port + n, inherit_settings=True, dsn=dsn, **tls
                )
            )
        for server in servers:
            server.wait_ready()
    except launcher.LaunchFailed as exc:
        launcher.stop_all(servers)
        raise click.ClickException(str(exc)) from exc
    except BaseException:
        launcher.stop_all(servers)
        raise
    return servers


def up_state(dsn: str, servers: list[Middleware], admin_token: str) -> localstate.UpState:
    return localstate.UpState(
        dsn=dsn,
        servers=[server.address for server in servers],
        pids=[server.process.pid for server in servers],
        admin_token=admin_token,
        ca=str(servers[0].ca) if servers and servers[0].ca is not None else "",
    )


def announce_databases(
    databases: list[embedded.EmbeddedPostgres],
    dsn: str,
    joined: list[nodes.Node],
    running_before: list[embedded.EmbeddedPostgres],
) -> None:
    """Where each database is: the control node, then each other node with its data dir."""
    click.echo(f"database {config.redact_dsn(dsn)}  (with its password: `courier db url`)")
    for node, database in zip(joined, databases[1:], strict=True):
        click.echo(f"node {node.id} database {config.redact_dsn(node.dsn)}  ({database.data_dir})")
    if databases[0] in running_before:
        click.echo("(the database was already running; it stays up afterwards)")
    for node, database in zip(joined, databases[1:], strict=True):
        if database in running_before:
            click.echo(f"(node {node.id}'s database was already running; it stays up afterwards)")


def announce(servers: list[Middleware], admin_token: str) -> None:
    addresses = ",".join(server.address for server in servers)
    for server in servers:
        click.echo(f"middleware {server.address}  (log: {server.log_path})")
    tls = f" --ca {servers[0].ca}" if servers and servers[0].ca is not None else ""
    click.echo(f"connect with: --servers {addresses}{tls}  (client commands default to these)")
    click.echo(f"console admin token (shown once; `courier console` uses it): {admin_token}")
    click.echo("Ctrl-C stops everything.")


def wait_for_stop(servers: list[Middleware]) -> None:
    """Block until SIGINT/SIGTERM, or until a middleware exits on its own."""
    watched = {*STOP_SIGNALS, signal.SIGCHLD}
    signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    try:
        while True:
            for server in servers:
                if server.process.poll() is not None:
                    raise click.ClickException(
                        f"the middleware on port {server.port} exited "
                        f"({server.process.returncode}); see {server.log_path}"
                    )
            if signal.sigwait(watched) in STOP_SIGNALS:
                return
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, watched)
