"""The handlers of the replicated-queue opcodes (0x40-0x44), one small function each.

They follow ``handlers``: identity from the session, one backend call, a typed
reply. A place names an ordinary member queue, so sending to it and reading from
it need no handlers of their own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from courier.protocol import frames
from courier.protocol.constants import Opcode

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from courier.server.handlers import Context


async def create_replicated(
    ctx: Context, request: frames.CreateReplicated
) -> frames.ReplicatedReply:
    created = await ctx.services.backend.create_replicated_queue(
        request.name,
        request.replicas,
        policy=request.policy,
        creator=ctx.session.require_client().id,
        max_queues=ctx.services.limits.max_queues_per_client,
        timing=ctx.timing,
    )
    return frames.ReplicatedReply(created)


async def delete_replicated(ctx: Context, request: frames.DeleteReplicated) -> frames.Done:
    actor = ctx.session.require_client().id  # its owner or an admin (each member checks)
    await ctx.services.backend.delete_replicated_queue(request.name, actor=actor, timing=ctx.timing)
    return frames.Done()


async def get_replicated(ctx: Context, request: frames.GetReplicated) -> frames.ReplicatedReply:
    found = await ctx.services.backend.get_replicated_queue(request.name, timing=ctx.timing)
    return frames.ReplicatedReply(found)


async def join_replicated(ctx: Context, request: frames.JoinReplicated) -> frames.PlaceReply:
    place = await ctx.services.backend.join_replicated(
        request.name,
        ctx.session.require_client().id,
        ctx.services.instance_id,
        request.role,
        timing=ctx.timing,
    )
    return frames.PlaceReply(place)


async def leave_replicated(ctx: Context, request: frames.LeaveReplicated) -> frames.Done:
    client = ctx.session.require_client().id
    await ctx.services.backend.leave_replicated(request.place_id, client, timing=ctx.timing)
    return frames.Done()


HANDLERS: dict[int, Callable[[Context, Any], Awaitable[frames.Reply]]] = {
    Opcode.CREATE_REPLICATED: create_replicated,
    Opcode.DELETE_REPLICATED: delete_replicated,
    Opcode.GET_REPLICATED: get_replicated,
    Opcode.JOIN_REPLICATED: join_replicated,
    Opcode.LEAVE_REPLICATED: leave_replicated,
}
"""Opcode -> handler for the replicated-queue opcodes; part of ``handlers.HANDLERS``."""
