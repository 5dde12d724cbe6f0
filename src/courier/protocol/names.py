"""Opcode and status names by wire code, as the measurement records spell them.

Both fields are one byte on the wire, so each table has 256 entries and any code
indexes it. The recorders name every request they record: an index costs tens of
nanoseconds, ``Opcode(code).name.lower()`` a few microseconds.

>>> OPERATIONS[Opcode.SEND], OPERATIONS[0x7F], STATUSES[errors.Status.QUEUE_EMPTY]
('send', '0x7f', 'QUEUE_EMPTY')
"""

from __future__ import annotations

from courier import errors
from courier.protocol import frames
from courier.protocol.constants import Opcode

_CODES = range(256)
_OPCODES = {int(opcode): opcode.name.lower() for opcode in Opcode}
_STATUSES = {int(status): status.name for status in errors.Status}

OPERATIONS: list[str] = [_OPCODES.get(code, f"0x{code:02x}") for code in _CODES]
"""Lowercase operation name by opcode, e.g. ``send``; unknown codes as ``0x7f``."""

STATUSES: list[str] = [_STATUSES.get(code, f"STATUS_{code}") for code in _CODES]
"""Status name by status code, e.g. ``OK``, ``QUEUE_EMPTY``."""


def operation_name(request: object, opcode_name: str) -> str:
    """The operation a record names a request by: ``pop`` or ``peek`` for a READ
    (whether it takes the message), else its opcode's name. Client and middleware
    records name a request alike, so the two can be compared operation by operation."""
    if type(request) is frames.Read:
        return "pop" if request.pop else "peek"
    return opcode_name
