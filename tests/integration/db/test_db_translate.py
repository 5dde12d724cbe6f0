"""Failures raised inside the database arrive as the matching courier.errors class."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from db_helpers import until_a_backend_waits_for_a_lock

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


CONFLICTS = [
    asyncpg.exceptions.DeadlockDetectedError("deadlock detected"),
    asyncpg.exceptions.SerializationError("could not serialize access"),
]


@pytest.mark.parametrize("conflict", CONFLICTS, ids=lambda exc: type(exc).__name__)
def test_a_call_aborted_over_a_conflict_is_unavailable(conflict: BaseException) -> None:
    assert isinstance(conflict, _translate.TRANSLATED)
    translated = _translate.translate(conflict)
    assert isinstance(translated, _translate.ConflictAborted)
    assert translated.status is errors.Status.UNAVAILABLE
    assert "nothing of it was applied" in translated.message


async def send_caught_in_a_deadlock(
    repo: repository.Repository, pool: asyncpg.Pool, dsn: str
) -> tuple[asyncio.Task[list[int]], list[int]]:
    """A send to queues A and B, which PostgreSQL aborts to break a deadlock: the send
    holds A (key share) and waits for B, which another transaction holds and which then
    asks for A. The other transaction commits once it has A. The send's task, and the
    two queues."""
    sender = await repo.register_client("sender")
    queues = [(await repo.create_queue(name)).id for name in ("a", "b")]
    other = await asyncpg.connect(dsn)
    try:
        async with other.transaction():
            await other.execute("SELECT FROM courier_queues WHERE id = $1 FOR UPDATE", queues[1])
            send = asyncio.create_task(repo.send(sender.id, queues, b"caught"))
            await until_a_backend_waits_for_a_lock(pool)
            # Waits until PostgreSQL, after its deadlock_timeout, aborts the send (it has
            # waited longer, so its check finds the cycle first).
            await other.execute("SELECT FROM courier_queues WHERE id = $1 FOR UPDATE", queues[0])
    finally:
        await other.close()
    return send, queues


async def test_a_call_the_database_aborted_to_break_a_deadlock_runs_again(
    repo: repository.Repository, pool: asyncpg.Pool, dsn: str
) -> None:
    send, queues = await send_caught_in_a_deadlock(repo, pool, dsn)
    ids = await asyncio.wait_for(send, 10)
    assert len(ids) == 2
    stored = await pool.fetch("SELECT queue_id, body FROM courier_messages ORDER BY queue_id")
    assert [(row["queue_id"], bytes(row["body"])) for row in stored] == [
        (queues[0], b"caught"), (queues[1], b"caught"),
    ]  # fmt: skip


async def test_a_call_aborted_more_often_than_it_may_run_again_is_unavailable(
    repo: repository.Repository, pool: asyncpg.Pool, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(repository, "CONFLICT_PAUSES_S", ())  # no second try
    send, _ = await send_caught_in_a_deadlock(repo, pool, dsn)
    with pytest.raises(errors.Unavailable, match="conflict with another") as caught:
        await asyncio.wait_for(send, 10)
    assert isinstance(caught.value.__cause__, asyncpg.exceptions.DeadlockDetectedError)
    assert await pool.fetchval("SELECT count(*) FROM courier_messages") == 0
