"""Failures raised inside the database arrive as the matching courier.errors class."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from courier import errors
from courier.db import _translate, repository

POOL_SIZE = 4
COURIER_STATUSES = [status for status in errors.Status if status is not errors.Status.OK]


@pytest.mark.parametrize("status", COURIER_STATUSES, ids=lambda status: status.name)
async def test_every_status_raised_in_sql_round_trips(
    pool: asyncpg.Pool, status: errors.Status
) -> None:
    with pytest.raises(asyncpg.PostgresError) as caught:
        await pool.execute("SELECT courier_fail_v1($1, 'said by SQL')", int(status))
    assert caught.value.sqlstate == _translate.sqlstate_for(status)

    translated = _translate.translate(caught.value)

    assert type(translated) is type(errors.for_status(status))
    assert translated.status is status
    if status is not errors.Status.PAYLOAD_TOO_LARGE:
        assert translated.message == "said by SQL"


async def test_unknown_courier_sqlstate_is_internal(pool: asyncpg.Pool) -> None:
    with pytest.raises(asyncpg.PostgresError) as caught:
        await pool.execute("SELECT courier_fail_v1(99, 'from the future')")
    assert isinstance(_translate.translate(caught.value), errors.InternalError)


async def test_other_database_errors_are_internal(pool: asyncpg.Pool) -> None:
    with pytest.raises(asyncpg.PostgresError) as caught:
        await pool.execute("SELECT * FROM no_such_table")
    assert isinstance(_translate.translate(caught.value), errors.InternalError)


async def test_bad_data_is_a_bad_request(pool: asyncpg.Pool) -> None:
    with pytest.raises(asyncpg.PostgresError) as caught:
        await pool.execute("SELECT 1 / 0")
    assert isinstance(_translate.translate(caught.value), errors.BadRequest)


LOST_CONNECTIONS = [
    ConnectionResetError(),
    asyncpg.InterfaceError("connection is closed"),
    asyncpg.InterfaceError("pool is closing"),
    asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
    # A backend terminated while its connection sat idle in the pool (asyncpg #1069).
    asyncpg.InternalClientError("cannot switch to state 12; another operation (2) is in progress"),
    asyncpg.ProtocolError("unexpected message"),
]


@pytest.mark.parametrize("lost", LOST_CONNECTIONS, ids=lambda exc: type(exc).__name__)
def test_lost_connections_are_unavailable(lost: BaseException) -> None:
    assert isinstance(lost, _translate.TRANSLATED)  # the repository lets it reach translate()
    assert isinstance(_translate.translate(lost), errors.Unavailable)


TERMINATE_OTHER_BACKENDS = """
SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()
  AND backend_type = 'client backend'
"""


# The pause decides what the pool's connections have seen when the next call comes:
# nothing yet (None), the server's farewell but not yet the closed socket (0, where
# asyncpg raises InternalClientError), or both (0.2).
@pytest.mark.parametrize("pause", [None, 0, 0.2], ids=["at once", "after a tick", "later"])
async def test_a_call_after_the_backends_were_terminated_is_unavailable_or_fine(
    dsn: str, pause: float | None
) -> None:
    pool = await asyncpg.create_pool(dsn, min_size=POOL_SIZE, max_size=POOL_SIZE)
    admin = await asyncpg.connect(dsn)
    try:
        repo = repository.Repository(pool)
        await asyncio.gather(*(repo.list_queues() for _ in range(POOL_SIZE)))
        assert await admin.fetchval(TERMINATE_OTHER_BACKENDS) == POOL_SIZE
        if pause is not None:
            await asyncio.sleep(pause)

        outcomes: list[str] = []
        for _ in range(2 * POOL_SIZE):  # enough to meet every dead connection
            try:
                await repo.list_queues()
                outcomes.append("answered")
            except errors.Unavailable as unavailable:  # anything else fails the test
                assert isinstance(unavailable.__cause__, _translate.TRANSLATED)
                outcomes.append("unavailable")

        assert outcomes[-POOL_SIZE:] == ["answered"] * POOL_SIZE  # reconnected, working again
    finally:
        await admin.close()
        await pool.close()


async def test_an_unreachable_database_is_unavailable(unused_tcp_port: int) -> None:
    with pytest.raises(errors.Unavailable):
        await repository.Repository.connect(f"postgresql://postgres@127.0.0.1:{unused_tcp_port}/x")
