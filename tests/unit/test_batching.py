"""The batcher's rules, on a scripted batch runner (the real database path is in
tests/integration/db/test_db_batches.py): batches form while a call is in flight, a
lone request goes out at once, one bad request never fails the others."""

from __future__ import annotations

import asyncio

import pytest

from courier import errors
from courier.db import batching, repository


class ScriptedRun:
    """Answers ``n`` with ``n * 10``, or with an error for the numbers in ``refuse``;
    a batch holding a number in ``poison`` fails whole. Every call waits for ``gate``."""

    def __init__(self, *, refuse: set[int] = frozenset(), poison: set[int] = frozenset()) -> None:
        self.batches: list[list[int]] = []
        self.refuse = refuse
        self.poison = poison
        self.gate = asyncio.Event()
        self.gate.set()

    async def __call__(self, requests: list[int]) -> repository.BatchOutcome[int]:
        self.batches.append(list(requests))
        await self.gate.wait()
        if self.poison & set(requests):
            raise errors.BadRequest("the database refused the whole statement")
        answers: list[int | errors.CourierError] = [
            errors.QueueNotFound(f"no queue {n}") if n in self.refuse else n * 10 for n in requests
        ]
        return repository.BatchOutcome(answers, exec_ns=5)


async def test_a_lone_request_goes_out_at_once() -> None:
    run = ScriptedRun()
    batcher = batching.Batcher(run)
    assert await asyncio.wait_for(batcher.submit(1), 1) == 10
    assert run.batches == [[1]]


async def test_requests_arriving_during_a_call_form_the_next_batch() -> None:
    run = ScriptedRun()
    run.gate.clear()
    batcher = batching.Batcher(run, max_in_flight=1)
    first = asyncio.ensure_future(batcher.submit(1))
    await asyncio.sleep(0)  # the first call is now in flight, held at the gate
    await asyncio.sleep(0)
    rest = [asyncio.ensure_future(batcher.submit(n)) for n in range(2, 7)]
    await asyncio.sleep(0)
    run.gate.set()
    assert await asyncio.gather(first, *rest) == [10, 20, 30, 40, 50, 60]
    assert run.batches == [[1], [2, 3, 4, 5, 6]]


async def test_the_batch_size_is_capped() -> None:
    run = ScriptedRun()
    batcher = batching.Batcher(run, max_batch=3, max_in_flight=1)
    results = await asyncio.gather(*(batcher.submit(n) for n in range(1, 8)))
    assert results == [n * 10 for n in range(1, 8)]
    assert [len(batch) for batch in run.batches] == [3, 3, 1]


async def test_a_batch_stops_before_its_cost_passes_the_budget() -> None:
    run = ScriptedRun()
    # Odd numbers cost one (a subtransaction each), even ones nothing.
    batcher = batching.Batcher(run, cost=lambda n: n % 2, max_cost=2, max_in_flight=1)
    results = await asyncio.gather(*(batcher.submit(n) for n in range(1, 10)))
    assert results == [n * 10 for n in range(1, 10)]
    assert run.batches == [[1, 2, 3, 4], [5, 6, 7, 8], [9]]


async def test_a_request_dearer_than_the_budget_still_goes_alone() -> None:
    run = ScriptedRun()
    batcher = batching.Batcher(run, cost=lambda n: n, max_cost=3, max_in_flight=1)
    assert await asyncio.gather(*(batcher.submit(n) for n in (5, 1, 1))) == [50, 10, 10]
    assert run.batches == [[5], [1, 1]]


async def test_each_request_gets_its_own_error() -> None:
    run = ScriptedRun(refuse={3})
    batcher = batching.Batcher(run)
    outcomes = await asyncio.gather(
        *(batcher.submit(n) for n in range(1, 6)), return_exceptions=True
    )
    assert outcomes[:2] == [10, 20] and outcomes[3:] == [40, 50]
    assert isinstance(outcomes[2], errors.QueueNotFound)


async def test_a_batch_that_fails_whole_is_retried_one_by_one() -> None:
    run = ScriptedRun(poison={4})
    batcher = batching.Batcher(run)
    outcomes = await asyncio.gather(
        *(batcher.submit(n) for n in range(1, 6)), return_exceptions=True
    )
    assert [outcomes[n] for n in (0, 1, 2, 4)] == [10, 20, 30, 50]
    assert isinstance(outcomes[3], errors.BadRequest)
    assert [4] in run.batches  # the poisoned request ran alone


async def test_an_outage_fails_the_whole_batch_without_retrying() -> None:
    calls = 0

    async def down(requests: list[int]) -> repository.BatchOutcome[int]:
        nonlocal calls
        calls += 1
        raise errors.Unavailable("the database is unavailable")

    batcher = batching.Batcher(down)
    outcomes = await asyncio.gather(*(batcher.submit(n) for n in range(3)), return_exceptions=True)
    assert all(isinstance(outcome, errors.Unavailable) for outcome in outcomes)
    assert calls == 1  # submitted together, so one call, and no retry per request


async def test_a_caller_that_gave_up_is_left_out_of_the_next_batch() -> None:
    run = ScriptedRun()
    run.gate.clear()
    batcher = batching.Batcher(run, max_in_flight=1)
    first = asyncio.ensure_future(batcher.submit(1))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    abandoned = asyncio.ensure_future(batcher.submit(2))
    kept = asyncio.ensure_future(batcher.submit(3))
    await asyncio.sleep(0)
    abandoned.cancel()
    run.gate.set()
    assert (await first, await kept) == (10, 30)
    with pytest.raises(asyncio.CancelledError):
        await abandoned
    assert run.batches == [[1], [3]]


async def test_timing_reports_the_wait_and_the_shared_call() -> None:
    batcher = batching.Batcher(ScriptedRun())
    timing = repository.Timing()
    await batcher.submit(1, timing)
    assert timing.exec_ns == 5
    assert timing.round_trip_ns > 0 and timing.pool_wait_ns >= 0


async def test_a_batch_refused_for_a_reason_other_than_bad_data_is_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def broken(requests: list[int]) -> repository.BatchOutcome[int]:
        if len(requests) > 1:
            raise errors.InternalError("function courier_exchange_v2 does not exist")
        return repository.BatchOutcome([requests[0] * 10], exec_ns=0)

    with caplog.at_level("DEBUG", logger="courier.db.batching"):
        broken_batcher = batching.Batcher(broken)
        assert await asyncio.gather(*(broken_batcher.submit(n) for n in (1, 2))) == [10, 20]
        refused_batcher = batching.Batcher(ScriptedRun(poison={2}))
        submitted = (refused_batcher.submit(n) for n in (1, 2))
        await asyncio.gather(*submitted, return_exceptions=True)
    assert [record.levelname for record in caplog.records] == ["WARNING", "DEBUG"]
    assert "does not exist" in caplog.records[0].getMessage()


async def test_a_batch_answered_wrongly_fails_its_callers_and_is_not_run_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[list[int]] = []

    async def short(requests: list[int]) -> repository.BatchOutcome[int]:
        calls.append(list(requests))
        return repository.BatchOutcome([1], exec_ns=0)  # one answer, whatever the batch

    batcher = batching.Batcher(short)
    with caplog.at_level("ERROR", logger="courier.db.batching"):
        outcomes = await asyncio.wait_for(
            asyncio.gather(*(batcher.submit(n) for n in (1, 2, 3)), return_exceptions=True), 1
        )
    assert all(isinstance(outcome, errors.InternalError) for outcome in outcomes)
    assert calls == [[1, 2, 3]]  # a call that may have committed is never repeated
    assert "answering a batch of 3 failed" in caplog.text


def test_a_request_the_database_left_unanswered_gets_its_own_error() -> None:
    """An exchange's rows answer each request they name; one no row names fails
    alone (an ack too, whose answer would otherwise be None), and a batch read may
    rightly get no row at all."""
    operations: list[repository.Operation] = [
        repository.SendRequest(1, [7], b"sent"),
        repository.SendRequest(1, [7], b"lost"),
        repository.AckRequest(1, 99),
        repository.AckRequest(1, 98),
        repository.PopManyRequest(1, 7, 5),
    ]
    answers = repository._Answers(operations)
    answers.take(0, {"status": 0, "message": None, "message_ids": [41]})
    answers.take(3, {"status": 0, "message": None})
    sent, lost, unacked, acked, popped = answers.finished()
    assert sent == [41] and acked is None and popped == []
    for missing in (lost, unacked):
        assert isinstance(missing, errors.InternalError)
        assert "unanswered" in missing.message
