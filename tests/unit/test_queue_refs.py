"""Queue refs: ids and Queue values need no lookup; names are looked up, cached, and
forgotten (with one retry) when the queue they named is gone. A unit test beside the
client's integration tests, which run the same paths against a real server."""

from __future__ import annotations

import pytest

from courier import errors, models
from courier.client.queue_refs import QueueNames, QueueRef


class Lookups:
    """GET_QUEUE as a table, noting every name asked for; like the client's, it
    remembers what it found."""

    def __init__(self, table: dict[str, int]) -> None:
        self.table = table
        self.asked: list[str] = []
        self.names = QueueNames(self)

    async def __call__(self, name: str) -> models.Queue:
        self.asked.append(name)
        if name not in self.table:
            raise errors.QueueNotFound(f"queue {name!r} does not exist")
        found = models.Queue(self.table[name], name)
        self.names.remember(found)
        return found


async def echo(ids: tuple[int, ...]) -> tuple[int, ...]:
    return ids


async def test_ids_and_queue_values_are_used_as_they_are() -> None:
    lookups = Lookups({})
    refs: list[QueueRef] = [7, models.Queue(9, "jobs"), 3]
    assert await lookups.names.apply(refs, echo) == (7, 9, 3)
    assert lookups.asked == []


async def test_a_name_is_looked_up_once_then_served_from_the_cache() -> None:
    lookups = Lookups({"jobs": 4})
    names = lookups.names
    assert await names.apply([1, "jobs"], echo) == (1, 4)
    assert await names.apply(["jobs"], echo) == (4,)
    assert lookups.asked == ["jobs"]


async def test_a_missing_queue_named_by_id_is_reported_by_its_id() -> None:
    async def gone(ids: tuple[int, ...]) -> None:
        raise errors.QueueNotFound(f"queue {ids[0]} does not exist")

    with pytest.raises(errors.QueueNotFound, match="queue 5 does not exist"):
        await Lookups({}).names.apply([5], gone)
    with pytest.raises(errors.QueueNotFound, match="queue 'jobs' does not exist"):
        await Lookups({}).names.apply([models.Queue(6, "jobs")], gone)


async def test_a_stale_cached_name_is_looked_up_again_once() -> None:
    lookups = Lookups({"jobs": 4})
    names = lookups.names
    await names.apply(["jobs"], echo)
    lookups.table["jobs"] = 8  # deleted and made again under the same name
    calls: list[tuple[int, ...]] = []

    async def only_the_new_one(ids: tuple[int, ...]) -> tuple[int, ...]:
        calls.append(ids)
        if ids != (8,):
            raise errors.QueueNotFound("queue 4 does not exist")
        return ids

    assert await names.apply(["jobs"], only_the_new_one) == (8,)
    assert calls == [(4,), (8,)]
    assert lookups.asked == ["jobs", "jobs"]
