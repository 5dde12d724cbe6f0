"""Moving messages from one node's queue to another's, exactly once (migration 0023).

``move`` runs the two steps joined by a fresh transfer id: out of the source queue
into the source node's outbox, then into the target queue once (the target keeps
the transfer id), then the outbox rows go. ``finish_pending`` completes what a
mover that stopped half-way left in an outbox: into the target again (a no-op if
it got there), or back into the source queue when the target queue is gone. No
message is lost, and none is ever visible in two queues at once.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Sequence
from itertools import groupby
from typing import Any

from courier import errors
from courier.db import nodes, repository

log = logging.getLogger(__name__)

KEEP_TRANSFER_IDS_S = 3600.0
"""How long a target remembers a transfer id, for a mover that retries step 2."""


def new_transfer_id() -> int:
    return secrets.randbits(62) + 1


async def move(
    source: repository.Repository,
    target: repository.Repository,
    source_queue: int,
    target_queue: int,
    count: int,
) -> int:
    """Move up to ``count`` of the oldest visible messages; how many moved."""
    transfer_id = new_transfer_id()
    rows = await source.transfer_out(transfer_id, source_queue, target_queue, count)
    if not rows:
        await source.transfer_done(transfer_id)
        return 0
    await _deliver(source, target, transfer_id, target_queue, rows)
    return len(rows)


async def finish_pending(
    source: repository.Repository, node_of_queue: Callable[[int], repository.Repository]
) -> int:
    """Complete the unfinished transfers of one node; how many messages they held."""
    finished = 0
    for transfer_id, group in groupby(await source.pending_transfers(), lambda r: r["transfer_id"]):
        rows = list(group)
        target_queue = rows[0]["target_queue_id"]
        await _deliver(source, node_of_queue(target_queue), transfer_id, target_queue, rows)
        finished += len(rows)
    return finished


async def _deliver(
    source: repository.Repository,
    target: repository.Repository,
    transfer_id: int,
    target_queue: int,
    rows: Sequence[Any],
) -> None:
    try:
        await target.transfer_in(transfer_id, target_queue, rows)
    except errors.QueueNotFound:
        returned = await source.transfer_back(transfer_id)
        log.info("queue %d is gone: %d message(s) went back", target_queue, returned)
        return
    await source.transfer_done(transfer_id)


def node_of(backends: dict[int, repository.Repository]) -> Callable[[int], repository.Repository]:
    """The repository of the node holding a queue id, from the node's repositories."""

    def find(queue_id: int) -> repository.Repository:
        node_id = nodes.node_of(queue_id)
        if node_id not in backends:
            raise errors.Unavailable(f"node {node_id} is not reachable")
        return backends[node_id]

    return find
