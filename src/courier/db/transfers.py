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


async def drain(
    source: repository.Repository,
    target: repository.Repository,
    source_queue: int,
    target_queue: int,
) -> tuple[int, bool]:
    """Move everything visible of a draining member; (moved, whether its queue is gone)."""
    transfer_id = new_transfer_id()
    moved, dropped = await source.drain_queue(transfer_id, source_queue, target_queue)
    rows = await source.outbox_rows(transfer_id) if moved else []
    if rows:
        await _deliver(source, target, transfer_id, target_queue, rows)
    else:
        await source.transfer_done(transfer_id)
    return moved, dropped


async def finish_pending(
    source: repository.Repository, node_of_queue: Callable[[int], repository.Repository]
) -> int:
    """Complete the unfinished transfers of one node; how many messages they held. A
    transfer that cannot be finished now (its target node out of reach) is logged and
    left for the next try, without holding up the others."""
    finished = 0
    for transfer_id, group in groupby(await source.pending_transfers(), lambda r: r["transfer_id"]):
        rows = list(group)
        target_queue = rows[0]["target_queue_id"]
        try:
            await _deliver(source, node_of_queue(target_queue), transfer_id, target_queue, rows)
        except errors.CourierError as exc:
            log.warning(
                "transfer %d to queue %d is not finished: %s", transfer_id, target_queue, exc
            )
            continue
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
    """The repository of the node holding a queue id, from the node's repositories; a
    node the cluster no longer has holds no queue (so the messages go back)."""

    def find(queue_id: int) -> repository.Repository:
        node_id = nodes.node_of(queue_id)
        if node_id not in backends:
            raise errors.QueueNotFound(f"node {node_id} is not in the cluster")
        return backends[node_id]

    return find
