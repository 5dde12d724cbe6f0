"""Naming queues in client calls: by id, by name or by a Queue value.

The wire speaks queue ids only. Names are resolved with GET_QUEUE and cached; a
cached id can go stale (the queue was deleted, perhaps made again under the same
name), so a call that used one and got QUEUE_NOT_FOUND forgets it and retries once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeAlias, TypeVar

from courier import errors, models

QueueRef: TypeAlias = int | str | models.Queue | models.Subscription
"""A queue by id (int), by name (str) or as returned by the client (Queue), or a
subscription's queue (Subscription)."""

T = TypeVar("T")


def as_list(queues: QueueRef | Sequence[QueueRef]) -> list[QueueRef]:
    """One queue or several, as a list."""
    if isinstance(queues, int | str | models.Queue | models.Subscription):
        return [queues]
    return list(queues)


def describe(ref: QueueRef) -> str:
    """How an error message names the queue: ``queue 'jobs'`` or ``queue 42``."""
    if isinstance(ref, models.Queue):
        return f"queue {ref.name!r}"
    if isinstance(ref, models.Subscription):
        return f"queue {ref.queue_name!r}"
    return f"queue {ref!r}"


def missing(refs: Sequence[QueueRef], exc: errors.QueueNotFound) -> errors.QueueNotFound:
    """The server's QueueNotFound, worded with the queue the caller named if it was one."""
    if len(refs) == 1:
        return errors.QueueNotFound(f"{describe(refs[0])} does not exist")
    return exc


class QueueNames:
    """Resolves queue refs to ids, caching name -> id."""

    def __init__(self, lookup: Callable[[str], Awaitable[models.Queue]]) -> None:
        self._lookup = lookup
        self._ids: dict[str, int] = {}

    def remember(self, queue: models.Queue) -> None:
        self._ids[queue.name] = queue.id

    def forget(self, name: str) -> None:
        self._ids.pop(name, None)

    async def apply(
        self, refs: Sequence[QueueRef], operation: Callable[[tuple[int, ...]], Awaitable[T]]
    ) -> T:
        """Run ``operation`` on the ids of ``refs``; retry once if a cached id was stale."""
        known = _known_ids(refs)  # ids without a coroutine per queue, when no ref is a name
        cached = [ref for ref in refs if isinstance(ref, str) and ref in self._ids]
        try:
            return await operation(known if known is not None else await self.ids(refs))
        except errors.QueueNotFound as exc:
            if not cached:
                raise missing(refs, exc) from None
        for name in cached:
            self.forget(name)
        try:
            return await operation(await self.ids(refs))
        except errors.QueueNotFound as exc:
            raise missing(refs, exc) from None

    async def ids(self, refs: Sequence[QueueRef]) -> tuple[int, ...]:
        return tuple([await self.id(ref) for ref in refs])

    async def id(self, ref: QueueRef) -> int:
        if isinstance(ref, models.Queue):
            return ref.id
        if isinstance(ref, models.Subscription):
            return ref.queue
        if isinstance(ref, int):
            return ref
        known = self._ids.get(ref)
        if known is not None:
            return known
        return (await self._lookup(ref)).id


def _known_ids(refs: Sequence[QueueRef]) -> tuple[int, ...] | None:
    """The ids of refs that name no queue by name, without a call; None if one does.
    Most calls give ids, and the general path costs a coroutine per queue."""
    ids: list[int] = []
    for ref in refs:
        if type(ref) is int:
            ids.append(ref)
        elif type(ref) is models.Queue:
            ids.append(ref.id)
        else:
            return None
    return tuple(ids)
