"""Named client behaviours: what one load-generator client does, over ``AsyncClient``.

A behaviour is one *iteration* (``async def iteration(ctx)``); the driver repeats
it back to back (closed loop, with an optional think time) or starts one per
Poisson arrival (open loop). docs/lab.md defines each behaviour; the tests hold
``standard`` to its definition.

Queues come from the runner, created before any client starts: ``shared`` is the
queue every ``standard`` client uses as "queue 1" (it is created first, so on a
fresh database its id is 1), ``pool`` the set that ``sender``, ``reader`` and
``bouncer`` pick from, ``pairs`` the request queue of ``pair-client`` /
``pair-server`` and ``jobs`` the service queue of ``producer`` / ``consumer``.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from courier import errors, models
from courier.client import AsyncClient

SHARED_QUEUE = "queue-00"
PAIRS_QUEUE = "pairs"
JOBS_QUEUE = "jobs"
WAIT_TIMEOUT = 1.0
"""Seconds a blocking call (receive, request) waits: short, so a run can end promptly."""


def pool_queue_names(count: int) -> list[str]:
    """Names of the shared queue set; the first is the shared queue ("queue 1")."""
    return [f"queue-{index:02d}" for index in range(count)]


@dataclass(frozen=True, slots=True)
class QueueIds:
    """Ids of the queues the runner created, in the order it created them."""

    pool: tuple[int, ...]
    pairs: int
    jobs: int

    @property
    def shared(self) -> int:
        return self.pool[0]


class PriorityChoice:
    """A priority distribution: ``"uniform"`` (1..10), a fixed int, or {priority: weight}."""

    def __init__(self, priorities: list[int], weights: list[float]) -> None:
        self.priorities = priorities
        self.cumulative = list(itertools.accumulate(weights))

    @classmethod
    def parse(cls, value: Any) -> PriorityChoice:
        if value == "uniform":
            span = range(models.MIN_PRIORITY, models.MAX_PRIORITY + 1)
            return cls(list(span), [1.0] * len(span))
        if isinstance(value, int) and not isinstance(value, bool):
            return cls(_checked_priorities([value]), [1.0])
        if isinstance(value, Mapping) and value:
            priorities = _checked_priorities([int(key) for key in value])
            weights = [float(weight) for weight in value.values()]
            if min(weights) < 0 or sum(weights) <= 0:
                raise ValueError("weights must be non-negative and not all zero")
            return cls(priorities, weights)
        raise ValueError(f"expected 'uniform', a priority or a table of weights, not {value!r}")

    def sample(self, rng: random.Random) -> int:
        if len(self.priorities) == 1:
            return self.priorities[0]
        return rng.choices(self.priorities, cum_weights=self.cumulative)[0]


def _checked_priorities(priorities: list[int]) -> list[int]:
    for priority in priorities:
        if not models.MIN_PRIORITY <= priority <= models.MAX_PRIORITY:
            raise ValueError(f"priority {priority} is not from 1 to 10")
    return priorities


@dataclass(slots=True)
class Context:
    """What one client's iterations share: its connection, identity and parameters."""

    client: AsyncClient
    me: int
    name: str
    queues: QueueIds
    body: str
    priorities: PriorityChoice
    targets_per_message: int = 1
    peers: tuple[int, ...] = ()
    rng: random.Random = field(default_factory=random.Random)
    _serial: Iterator[int] = field(default_factory=itertools.count)

    def priority(self) -> int:
        return self.priorities.sample(self.rng)

    def fresh_queue_name(self) -> str:
        """Unique per client and iteration, so concurrent open-loop iterations never clash."""
        return f"{self.name}-q{next(self._serial)}"


def message_body(size: int) -> str:
    """A message body of exactly ``size`` characters."""
    pattern = "courier-lab-"
    return (pattern * (size // len(pattern) + 1))[:size]


Iteration = Callable[[Context], Awaitable[None]]


async def standard(ctx: Context) -> None:
    """The 12-step cycle of docs/lab.md; its own messages and queue are gone at the end."""
    client, shared, me = ctx.client, ctx.queues.shared, ctx.me
    await client.send(shared, ctx.body, priority=ctx.priority())  # 1 to anyone
    await client.peek(shared)  # 2
    await client.pop(shared)  # 3
    await client.send(shared, ctx.body, receiver=me, priority=ctx.priority())  # 4 to myself
    await client.peek(shared, sender=me)  # 5
    await client.pop(shared, sender=me)  # 6
    queue = await client.create_queue(ctx.fresh_queue_name())  # 7
    await client.send(queue.id, ctx.body, priority=ctx.priority())  # 8
    await client.queues_for_me()  # 9
    await client.peek(sender=me)  # 10
    await client.pop(queue.id)  # 11
    await client.delete_queue(queue.id)  # 12


async def sender(ctx: Context) -> None:
    """Send one message to ``targets_per_message`` distinct random queues of the pool."""
    targets = ctx.rng.sample(ctx.queues.pool, ctx.targets_per_message)
    await ctx.client.send(targets, ctx.body, priority=ctx.priority())


async def reader(ctx: Context) -> None:
    """Pop from a random queue of the pool (an empty queue is a normal answer)."""
    await ctx.client.pop(ctx.rng.choice(ctx.queues.pool))


async def bouncer(ctx: Context) -> None:
    """Pop a message for me from a pool queue and send it on to a random peer and queue.

    QUEUES_FOR_ME names the pool queues holding a message I may read; the pop takes
    the first one there (addressed to me, or to anyone).
    """
    listed = await ctx.client.queues_for_me()
    mine = [queue.id for queue in listed if queue.id in ctx.queues.pool]
    if not mine:
        return
    message = await ctx.client.pop(ctx.rng.choice(mine))
    if message is None:
        return  # another reader took it
    await ctx.client.send(
        ctx.rng.choice(ctx.queues.pool), message.body,
        receiver=_random_peer(ctx), priority=message.priority,
    )  # fmt: skip


async def bouncer_setup(ctx: Context) -> None:
    """Put one message in play per bouncer, so bouncers have something to pass on."""
    await ctx.client.send(
        ctx.rng.choice(ctx.queues.pool), ctx.body, receiver=_random_peer(ctx),
        priority=ctx.priority(),
    )  # fmt: skip


def _random_peer(ctx: Context) -> int:
    return ctx.rng.choice(ctx.peers) if ctx.peers else ctx.me


async def pair_client(ctx: Context) -> None:
    """Send a request to the pairs queue and wait for its reply (RequestTimeout if none)."""
    try:
        await ctx.client.request(ctx.queues.pairs, ctx.body, timeout=WAIT_TIMEOUT)
    except errors.RequestTimeout:
        return  # no pair-server answered in time: its AWAIT_RESPONSE shows NO_MESSAGE


async def pair_server(ctx: Context) -> None:
    """Take the next request from the pairs queue and answer it."""
    request = await ctx.client.receive(ctx.queues.pairs, timeout=WAIT_TIMEOUT)
    if request is not None and request.context is not None:
        await ctx.client.reply(request, ctx.body)


async def producer(ctx: Context) -> None:
    """Put a job in the jobs queue and go on without waiting for anyone."""
    await ctx.client.send(ctx.queues.jobs, ctx.body, priority=ctx.priority())


async def consumer(ctx: Context) -> None:
    """Take the next job from the jobs queue, waiting briefly if there is none."""
    await ctx.client.receive(ctx.queues.jobs, timeout=WAIT_TIMEOUT)


async def ping(ctx: Context) -> None:
    await ctx.client.ping()


BEHAVIOURS: dict[str, Iteration] = {
    "standard": standard,
    "sender": sender,
    "reader": reader,
    "bouncer": bouncer,
    "pair-client": pair_client,
    "pair-server": pair_server,
    "producer": producer,
    "consumer": consumer,
    "ping": ping,
}

SETUPS: dict[str, Iteration] = {"bouncer": bouncer_setup}
"""Run once per client before the load starts."""
