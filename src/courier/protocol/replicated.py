"""Bodies of the replicated-queue block (0x40-0x44): requests and their replies.

Layouts are in docs/protocol.md, "Replicated queues". A policy and a role each
travel as one byte.
"""

from __future__ import annotations

from collections.abc import Callable

from courier import models
from courier.protocol import frames, wire
from courier.protocol.constants import Opcode

POLICY_CODES = {models.Policy.BALANCED: 0, models.Policy.ROUND_ROBIN: 1}
POLICIES = {code: policy for policy, code in POLICY_CODES.items()}
ROLE_CODES = {models.Role.PRODUCER: 0, models.Role.CONSUMER: 1}
ROLES = {code: role for role, code in ROLE_CODES.items()}


def write_request(writer: wire.Writer, request: frames.Request) -> bool:
    """Append the body of a request of this block; False for any other request."""
    match request:
        case frames.CreateReplicated(name=name, replicas=replicas, policy=policy):
            writer.name(name, "name")
            writer.u16(replicas, "replicas")
            wire.write_code(writer, POLICY_CODES, policy, "policy")
        case frames.DeleteReplicated(name=name) | frames.GetReplicated(name=name):
            writer.name(name, "name")
        case frames.JoinReplicated(name=name, role=role):
            writer.name(name, "name")
            wire.write_code(writer, ROLE_CODES, role, "role")
        case frames.LeaveReplicated(place_id=place_id):
            writer.i64(place_id, "place_id")
        case _:
            return False
    return True


def write_reply(writer: wire.Writer, reply: frames.Reply) -> bool:
    """Append the payload of a reply of this block; False for any other reply."""
    match reply:
        case frames.ReplicatedReply(replicated=replicated):
            write_replicated(writer, replicated)
        case frames.PlaceReply(place=place):
            writer.i64(place.id, "place.id")
            writer.u16(place.member, "place.member")
            writer.i64(place.queue, "place.queue")
            writer.name(place.queue_name, "place.queue_name")
            writer.u16(place.replicas, "place.replicas")
        case _:
            return False
    return True


def write_replicated(writer: wire.Writer, replicated: models.ReplicatedQueue) -> None:
    writer.i64(replicated.id, "replicated.id")
    writer.name(replicated.name, "replicated.name")
    wire.write_code(writer, POLICY_CODES, replicated.policy, "replicated.policy")
    writer.u16(len(replicated.members), "len(replicated.members)")
    for member in replicated.members:
        writer.u16(member.member, "members[].member")
        writer.i64(member.queue, "members[].queue")
        writer.name(member.queue_name, "members[].queue_name")
        writer.u16(member.node, "members[].node")
        writer.u32(member.producers, "members[].producers")
        writer.u32(member.consumers, "members[].consumers")
        writer.u32(member.length, "members[].length")


def read_replicated(reader: wire.Reader) -> models.ReplicatedQueue:
    replicated_id, name = reader.i64("replicated.id"), reader.name("replicated.name")
    policy = reader.enum(POLICIES, "replicated.policy")
    members = tuple(
        models.Replica(
            member=reader.u16("members[].member"),
            queue=reader.i64("members[].queue"),
            queue_name=reader.name("members[].queue_name"),
            node=reader.u16("members[].node"),
            producers=reader.u32("members[].producers"),
            consumers=reader.u32("members[].consumers"),
            length=reader.u32("members[].length"),
        )
        for _ in range(reader.u16("len(replicated.members)"))
    )
    return models.ReplicatedQueue(replicated_id, name, policy, members)


def read_place(reader: wire.Reader) -> frames.PlaceReply:
    return frames.PlaceReply(
        models.Place(
            id=reader.i64("place.id"),
            member=reader.u16("place.member"),
            queue=reader.i64("place.queue"),
            queue_name=reader.name("place.queue_name"),
            replicas=reader.u16("place.replicas"),
        )
    )


REQUEST_READERS: dict[int, Callable[[wire.Reader], frames.Request]] = {
    Opcode.CREATE_REPLICATED: lambda reader: frames.CreateReplicated(
        reader.name("name"), reader.u16("replicas"), reader.enum(POLICIES, "policy")
    ),
    Opcode.DELETE_REPLICATED: lambda reader: frames.DeleteReplicated(reader.name("name")),
    Opcode.GET_REPLICATED: lambda reader: frames.GetReplicated(reader.name("name")),
    Opcode.JOIN_REPLICATED: lambda reader: frames.JoinReplicated(
        reader.name("name"), reader.enum(ROLES, "role")
    ),
    Opcode.LEAVE_REPLICATED: lambda reader: frames.LeaveReplicated(reader.i64("place_id")),
}

PAYLOAD_READERS: dict[type[frames.Reply], Callable[[wire.Reader], frames.Reply]] = {
    frames.ReplicatedReply: lambda reader: frames.ReplicatedReply(read_replicated(reader)),
    frames.PlaceReply: read_place,
}
