"""The COMMIT handler: a whole transaction, checked, then applied in one call.

The client buffers a transaction's sends, publishes and acks and sends them in one
COMMIT, so nothing of it is visible before, and a transaction whose connection is
lost never arrives. Here it is refused, before any database work, when it is too
old, holds too many operations or too many bytes, or one body is too large; then
``courier_commit_v3`` applies it all or none, properties and persistence included.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from courier import config, errors, protocol
from courier.db import transactions
from courier.protocol import frames

if TYPE_CHECKING:
    from courier.server.handlers import Context

Operation = frames.Send | frames.Publish | frames.Ack


async def commit(ctx: Context, request: frames.Commit) -> frames.CommitReply:
    limits = ctx.services.limits
    check_age(request.age_ms, limits)
    check_size(request.operations, limits)
    if not request.operations:
        return frames.CommitReply(())
    client = ctx.session.require_client()
    if any(not isinstance(operation, frames.Ack) for operation in request.operations):
        ctx.session.require_writer()
    results = await ctx.services.backend.commit(
        client.id, [operation_for(operation) for operation in request.operations],
        timing=ctx.timing,
    )  # fmt: skip
    for operation in request.operations:
        if not isinstance(operation, frames.Ack):
            ctx.services.due_in(operation.delay_ms)
            ctx.services.due_in(operation.ttl_ms)
    return frames.CommitReply(tuple(tuple(ids) for ids in results))


def check_age(age_ms: int, limits: config.Limits) -> None:
    if age_ms > limits.max_transaction_age * 1000:
        raise errors.TransactionExpired(
            f"the transaction was open {age_ms / 1000:g}s; at most"
            f" {limits.max_transaction_age:g}s may pass before its commit: nothing was applied"
        )


def check_size(operations: tuple[Operation, ...], limits: config.Limits) -> None:
    """Count, each body, and all bodies with their properties, before any database
    work (the properties' own limits hold on the wire)."""
    if len(operations) > limits.max_transaction_operations:
        raise errors.BadRequest(
            f"a transaction holds at most {limits.max_transaction_operations} operations;"
            f" this one has {len(operations)}"
        )
    total = 0
    for number, operation in enumerate(operations, 1):
        if isinstance(operation, frames.Ack):
            continue
        total += len(operation.body) + protocol.properties_size(operation.properties)
        if len(operation.body) > limits.max_body_bytes:
            too_large = errors.PayloadTooLarge(
                size=len(operation.body), limit=limits.max_body_bytes
            )
            raise errors.in_transaction(number, too_large)
        if (
            isinstance(operation, frames.Send)
            and len(operation.queue_ids) > limits.max_queues_per_send
        ):
            raise errors.in_transaction(
                number,
                errors.BadRequest(f"a send names at most {limits.max_queues_per_send} queues"),
            )
    if total > limits.max_batch_bytes:
        raise errors.PayloadTooLarge(
            f"the transaction's bodies and properties are {total} bytes; a transaction"
            f" holds at most"
            f" {limits.max_batch_bytes}"
        )


def operation_for(operation: Operation) -> transactions.Operation:
    match operation:
        case frames.Ack(delivery_id=delivery_id):
            return transactions.AckOperation(delivery_id)
        case frames.Send():
            return transactions.SendOperation(
                operation.queue_ids, operation.body, operation.receiver, operation.priority,
                operation.context, operation.delay_ms, operation.ttl_ms, operation.dedup_id,
                operation.properties, operation.persistent,
            )  # fmt: skip
        case frames.Publish():
            topic = operation.topic_id if operation.topic_id is not None else operation.topic_name
            if topic is None:
                raise errors.BadRequest("name a topic by id or by name")
            return transactions.PublishOperation(
                topic, operation.body, operation.receiver, operation.priority,
                operation.context, operation.delay_ms, operation.ttl_ms, operation.dedup_id,
                operation.properties, operation.persistent,
            )  # fmt: skip
