"""`courier node list|add|remove` run as real commands against databases of the test server."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING

import asyncpg

from courier import config
from courier.db import schema

if TYPE_CHECKING:
    pass

COURIER = str(Path(sys.executable).with_name("courier"))
EXIT_REFUSED = 1  # NodeError: a CourierError with no code of its own
EXIT_UNAVAILABLE = 13
EXIT_USAGE = 2


def courier(*args: str, dsn: str | None, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run `courier ARGS` with COURIER_DSN set (when given) and an empty data dir."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("COURIER_")}
    env["COURIER_DATA_DIR"] = str(tmp_path / "courier")
    env["COLUMNS"] = "200"  # wide enough for rich to print every DSN whole
    if dsn is not None:
        env["COURIER_DSN"] = dsn
    return subprocess.run(
        [COURIER, *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def execute(dsn: str, statement: str) -> None:
    async def run() -> None:
        connection = await asyncpg.connect(dsn)
        try:
            await connection.execute(statement)
        finally:
            await connection.close()

    asyncio.run(run())


def table_rows(output: str) -> list[list[str]]:
    """The cells of each body row of a rich table (its header's rule is another)."""
    rows = [line for line in output.splitlines() if line.startswith("│")]
    return [[cell.strip() for cell in row.strip("│").split("│")] for row in rows]


def test_a_database_alone_is_a_cluster_of_one(dsn: str, tmp_path: Path) -> None:
    listed = courier("node", "list", dsn=dsn, tmp_path=tmp_path)
    assert listed.returncode == 0, listed.stderr
    password = urllib.parse.urlsplit(dsn).password
    assert password and password not in listed.stdout
    assert table_rows(listed.stdout) == [["1", "active", "", "0", dsn.replace(password, "***")]]


def test_add_list_and_remove_a_node(dsn: str, empty_dsn: str, tmp_path: Path) -> None:
    added = courier("node", "add", empty_dsn, "--capacity", "8", dsn=None, tmp_path=tmp_path)
    assert added.returncode == EXIT_USAGE  # no --dsn, no COURIER_DSN, no `courier up`
    added = courier("node", "add", empty_dsn, "--capacity", "8", "--dsn", dsn, dsn=None,
                    tmp_path=tmp_path)  # fmt: skip
    assert (added.returncode, added.stdout) == (0, "2\n"), added.stderr
    execute(dsn, "SELECT * FROM courier_create_queue_v1('on-one')")
    execute(dsn, "SELECT * FROM courier_reserve_queue_home_v1('on-two', 2)")

    rows = table_rows(courier("node", "list", dsn=dsn, tmp_path=tmp_path).stdout)
    assert [row[:4] for row in rows] == [["1", "active", "", "1"], ["2", "active", "8", "1"]]
    assert rows[1][4] == config.redact_dsn(empty_dsn) != empty_dsn

    held = courier("node", "remove", "2", dsn=dsn, tmp_path=tmp_path)
    assert (held.returncode, held.stderr) == (
        EXIT_REFUSED,
        "error: node 2 still holds 1 queue(s)\n",
    )
    execute(dsn, "SELECT * FROM courier_release_queue_home_v1('on-two', 2)")
    removed = courier("node", "remove", "2", dsn=dsn, tmp_path=tmp_path)
    assert (removed.returncode, removed.stdout) == (0, "removed node 2\n"), removed.stderr
    rows = table_rows(courier("node", "list", dsn=dsn, tmp_path=tmp_path).stdout)
    assert [row[:2] for row in rows] == [["1", "active"], ["2", "removed"]]


def test_refusals_are_one_line_and_exit_non_zero(dsn: str, empty_dsn: str, tmp_path: Path) -> None:
    asyncio.run(schema.migrate(empty_dsn))
    execute(empty_dsn, "SELECT * FROM courier_create_queue_v1('taken')")  # already in use
    refusals = {
        ("node", "add", empty_dsn): "error: only an empty Courier database can become node 2\n",
        ("node", "remove", "1"): "error: node 1 is the control node and cannot be removed\n",
        ("node", "remove", "5"): "error: no active node 5\n",
    }
    for args, message in refusals.items():
        refused = courier(*args, dsn=dsn, tmp_path=tmp_path)
        assert (refused.returncode, refused.stderr) == (EXIT_REFUSED, message), args

    nowhere = "postgresql://postgres:s3cret@127.0.0.1:1/courier"
    unreachable = courier("node", "list", dsn=nowhere, tmp_path=tmp_path)
    assert unreachable.returncode == EXIT_UNAVAILABLE
    assert unreachable.stderr.startswith("error: cannot reach postgresql://postgres:***@")
    assert len(unreachable.stderr.splitlines()) == 1 and "s3cret" not in unreachable.stderr
