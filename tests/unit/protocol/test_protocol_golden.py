"""The golden byte vectors and tables in docs/protocol.md hold for the code.

The vectors are read from the document itself, so the spec cannot drift.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from courier import errors, models, protocol

DOC = Path(__file__).resolve().parents[3] / "docs" / "protocol.md"
GOLDEN_BLOCK = re.compile(r"^```golden\n(.*?)^```", re.DOTALL | re.MULTILINE)
KEY_LINE = re.compile(r"^([a-z_]+): (.*)$")

NAMESPACE: dict[str, Any] = {
    **{name: getattr(protocol, name) for name in protocol.__all__},
    "ClientMode": models.ClientMode,
    "Order": models.Order,
    "Overflow": models.Overflow,
    "Queue": models.Queue,
    "QueueSettings": models.QueueSettings,
    "QueueAcl": models.QueueAcl,
    "Message": models.Message,
    "ClientInfo": models.ClientInfo,
    "ClientIdentity": models.ClientIdentity,
    "Draft": models.Draft,
    "Settled": models.Settled,
    "Verifier": models.Verifier,
    "bytes": bytes,
    "range": range,
    "Topic": models.Topic,
    "Subscription": models.Subscription,
    "Policy": models.Policy,
    "Role": models.Role,
    "ReplicatedQueue": models.ReplicatedQueue,
    "Replica": models.Replica,
    "Place": models.Place,
    "Status": errors.Status,
    "datetime": datetime,
    "UTC": UTC,
}


@dataclass(frozen=True)
class Vector:
    name: str
    request_id: int
    opcode: int | None
    message: protocol.Request | protocol.Reply
    data: bytes


def parse_block(text: str) -> Vector:
    keys: dict[str, str] = {}
    hex_digits = []
    for line in text.splitlines():
        match = KEY_LINE.match(line)
        if match:
            keys[match[1]] = match[2]
        else:
            hex_digits.append(line.split("#", 1)[0])
    opcode = keys.get("opcode")
    return Vector(
        name=keys["name"],
        request_id=int(keys["request_id"]),
        opcode=None if opcode is None else protocol.Opcode[opcode],
        message=eval(keys["message"], {"__builtins__": {}}, NAMESPACE),
        data=bytes.fromhex("".join(hex_digits)),
    )


def load_vectors() -> list[Vector]:
    return [parse_block(block) for block in GOLDEN_BLOCK.findall(DOC.read_text())]


VECTORS = load_vectors()


def test_the_document_has_a_vector_for_every_frame_type() -> None:
    covered = {type(vector.message) for vector in VECTORS}
    every_type = set(protocol.REQUEST_TYPES.values()) | set(protocol.REPLY_TYPES.values())
    assert covered == every_type | {protocol.ErrorReply}
    assert len({vector.name for vector in VECTORS}) == len(VECTORS)


def test_every_opcode_has_a_request_vector_and_a_reply_vector() -> None:
    requests = {protocol.opcode_of(v.message) for v in VECTORS if protocol.is_request(v.message)}
    answered = {
        v.opcode
        for v in VECTORS
        if v.opcode is not None and not isinstance(v.message, protocol.ErrorReply)
    }
    assert requests == set(protocol.Opcode)
    assert answered == set(protocol.Opcode)


@pytest.mark.parametrize("vector", VECTORS, ids=lambda vector: vector.name)
def test_encode_gives_the_documented_bytes(vector: Vector) -> None:
    assert protocol.encode(vector.request_id, vector.message, opcode=vector.opcode) == vector.data


@pytest.mark.parametrize("vector", VECTORS, ids=lambda vector: vector.name)
def test_documented_bytes_decode_to_the_message(vector: Vector) -> None:
    (raw,) = protocol.Decoder().feed(vector.data)
    assert raw.request_id == vector.request_id
    assert raw.size == len(vector.data)
    assert raw.is_response is protocol.is_reply(vector.message)
    assert protocol.parse(raw) == vector.message


def test_timestamps_decode_as_utc_aware_datetimes() -> None:
    replies = [v.message for v in VECTORS if isinstance(v.message, protocol.MessageReply)]
    assert replies
    for reply in replies:
        data = protocol.encode(1, reply, opcode=protocol.Opcode.READ)
        (raw,) = protocol.Decoder().feed(data)
        decoded = protocol.parse(raw)
        assert isinstance(decoded, protocol.MessageReply)
        assert decoded.message.created_at.utcoffset() == timedelta(0)


def table_rows(heading: str) -> list[list[str]]:
    """Cells of the first table after a markdown heading, backticks removed."""
    section = DOC.read_text().split(heading, 1)[1]
    rows = []
    for line in section.splitlines():
        if line.startswith("|"):
            rows.append([cell.strip().strip("`") for cell in line.strip("|").split("|")])
        elif rows:
            break
    return rows[2:]  # past the header and the separator


def test_status_table_matches_errors_module() -> None:
    rows = table_rows("### Status codes")
    assert [(int(code), name) for code, name, _ in rows] == [
        (s.value, s.name) for s in errors.Status
    ]
    for code, _, exception in rows[1:]:
        assert type(errors.for_status(int(code))).__name__ == exception


def test_opcode_table_matches_the_code() -> None:
    rows = table_rows("### Opcodes")
    assert [(int(code, 16), name) for code, name, _, _ in rows] == [
        (op.value, op.name) for op in protocol.Opcode
    ]
    for _, name, request, reply in rows:
        opcode = protocol.Opcode[name]
        assert protocol.REQUEST_TYPES[opcode].__name__ == request
        assert protocol.reply_type(opcode).__name__ == reply
