"""Shared fixtures: every test that needs PostgreSQL gets a real one.

The test server is an embedded PostgreSQL started once per session in a temp dir, on
a free loopback port (no fsync, for speed), or the external server named by the
environment variable COURIER_TEST_DSN (e.g. postgresql://postgres@127.0.0.1/postgres;
its database is only used to create and drop others). The Courier schema is
migrated ONCE into a template database; each test gets its own copy.

Fixtures
    postgres_admin_dsn  (session) DSN on the test server for creating/dropping databases.
    databases           (session) ``TestDatabases``: ``create(template=...) -> dsn``
                        and ``drop(dsn)``; what it creates is dropped at session end.
    template_database   (session) name of the migrated template database.
    dsn                 (function) DSN of a fresh migrated database for this test,
                        dropped afterwards (connections still open are terminated,
                        so server subprocesses may simply be given this string).
    pool                (function, async) asyncpg pool on ``dsn`` (max 10 connections).
    repo                (function) ``courier.db.repository.Repository`` over ``pool``.
    module_dsn          (module) like ``dsn``, shared by the tests of one module.
    empty_dsn           (function) DSN of a fresh database without the schema (a node
                        to add to a cluster, a target to migrate), dropped afterwards.
    servers             (module, async) two running `courier serve` processes on
                        ``module_dsn`` (``helpers.servers.ServerProcess``).
    default_secrets     (autouse) clients register and log in with ``secret_for(name)``
                        unless a test gives a secret (``helpers.credentials``);
                        ``without_default_secrets`` turns that off for a test.
    unique              ``unique(prefix)``: a name no other test has used, so tests
                        can share ``module_dsn`` and its servers (``helpers.names``).
    spark               (session) the one Spark session (local[2]) of this test process;
                        nothing else may stop it, since a later test would find it dead.

Sync tests may use ``dsn`` too: the database work runs on its own thread and loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import os
import shutil
import tempfile
import urllib.parse
import uuid
from collections.abc import AsyncIterator, Coroutine, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import asyncpg
import pytest

from courier.db import embedded, repository, schema
from helpers.names import Unique, unique_name
from helpers.servers import ServerProcess, running_servers

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytest_plugins = ["helpers.credentials"]  # default_secrets, without_default_secrets

TEST_DSN_VARIABLE = "COURIER_TEST_DSN"

_T = TypeVar("_T")


def run_sync(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Run a coroutine on a private loop in a worker thread (safe inside a running loop)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as executor:
        return executor.submit(asyncio.run, coroutine).result()


def dsn_with_database(dsn: str, database: str) -> str:
    parts = urllib.parse.urlsplit(dsn)
    return urllib.parse.urlunsplit(parts._replace(path="/" + database))


class TestDatabases:
    """Creates and drops uniquely named databases on the test server."""

    __test__ = False  # not a test class, despite the name

    def __init__(self, admin_dsn: str) -> None:
        self.admin_dsn = admin_dsn
        self._prefix = f"courier_test_{uuid.uuid4().hex[:8]}"
        self._counter = itertools.count()
        self._created: list[str] = []

    def create(self, template: str | None = None) -> str:
        """A new database (empty, or a copy of template); returns its DSN."""
        name = f"{self._prefix}_{next(self._counter)}"
        run_sync(self._execute(f'CREATE DATABASE "{name}"' + self._copy_clause(template)))
        self._created.append(name)
        return dsn_with_database(self.admin_dsn, name)

    @contextlib.contextmanager
    def copy(self, template: str) -> Iterator[str]:
        """A new copy of template for the block (its DSN); dropped afterwards."""
        copied = self.create(template=template)
        try:
            yield copied
        finally:
            self.drop(copied)

    def drop(self, dsn: str) -> None:
        name = urllib.parse.urlsplit(dsn).path.lstrip("/")
        run_sync(self._execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        if name in self._created:
            self._created.remove(name)

    def drop_all(self) -> None:
        for name in list(self._created):
            self.drop(dsn_with_database(self.admin_dsn, name))

    def _copy_clause(self, template: str | None) -> str:
        return "" if template is None else f' TEMPLATE "{template}"'

    async def _execute(self, statement: str) -> None:
        connection = await asyncpg.connect(self.admin_dsn)
        try:
            await connection.execute(statement)
        finally:
            await connection.close()


@pytest.fixture(scope="session")
def postgres_admin_dsn() -> Iterator[str]:
    external = os.environ.get(TEST_DSN_VARIABLE)
    if external:
        yield external
        return
    # Not under pytest's basetemp: every pytest run resets that to mode 0700, which
    # would lock the server's system user (when running as root) out of its data dir.
    home = Path(tempfile.mkdtemp(prefix="courier-test-pg-"))
    server = embedded.EmbeddedPostgres(home / "data", durable=False)
    try:
        server.start()
        yield server.admin_dsn
    finally:
        server.stop()
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def databases(postgres_admin_dsn: str) -> Iterator[TestDatabases]:
    created = TestDatabases(postgres_admin_dsn)
    try:
        yield created
    finally:
        created.drop_all()


@pytest.fixture(scope="session")
def template_database(databases: TestDatabases) -> str:
    template_dsn = databases.create()
    run_sync(schema.migrate(template_dsn))
    return urllib.parse.urlsplit(template_dsn).path.lstrip("/")


@pytest.fixture
def dsn(databases: TestDatabases, template_database: str) -> Iterator[str]:
    with databases.copy(template_database) as test_dsn:
        yield test_dsn


@pytest.fixture(scope="module")
def module_dsn(databases: TestDatabases, template_database: str) -> Iterator[str]:
    with databases.copy(template_database) as shared_dsn:
        yield shared_dsn


@pytest.fixture
def empty_dsn(databases: TestDatabases) -> Iterator[str]:
    created = databases.create()
    yield created
    databases.drop(created)


@pytest.fixture
async def pool(dsn: str) -> AsyncIterator[asyncpg.Pool]:
    opened = await asyncpg.create_pool(dsn, min_size=1, max_size=10)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
def repo(pool: asyncpg.Pool) -> repository.Repository:
    return repository.Repository(pool)


@pytest.fixture(scope="module")
async def servers(
    module_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[list[ServerProcess]]:
    log_dir = tmp_path_factory.mktemp("servers")
    async with running_servers(module_dsn, log_dir, count=2) as started:
        yield started


@pytest.fixture(scope="session", autouse=True)
def secrets_by_default(default_secrets: None) -> None:
    """Every client a test makes logs in with a secret (``helpers.credentials``)."""


@pytest.fixture
def unique() -> Unique:
    return unique_name


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from courier.analysis import session  # PySpark loads only in the processes that need it

    started = session.create("local[2]", driver_memory="1g")
    yield started
    started.stop()
