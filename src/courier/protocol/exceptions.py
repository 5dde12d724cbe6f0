"""Precise protocol errors; all are ``errors.ProtocolError`` (sent as BAD_REQUEST).

ProtocolError
├── FramingError         the stream can no longer be cut into frames: close it
│   ├── UnsupportedVersion(version)
│   └── FrameTooLarge(size, limit)
├── UnknownOpcode(opcode)          one frame is bad; the connection is fine
├── MalformedBody(opcode, reason)  one frame is bad; the connection is fine
└── EncodeError(opcode, reason)    a value cannot be put on the wire
"""

from __future__ import annotations

from courier import errors
from courier.protocol import constants


def opcode_name(opcode: int) -> str:
    try:
        return constants.Opcode(opcode).name
    except ValueError:
        return f"0x{opcode:02x}"


class FramingError(errors.ProtocolError):
    """The byte stream cannot be cut into frames any more; the connection must close."""


class UnsupportedVersion(FramingError):
    """Unsupported protocol version."""

    def __init__(self, version: int) -> None:
        self.version = version
        super().__init__(
            f"protocol version {version} is not supported (this side speaks {constants.VERSION})"
        )


class FrameTooLarge(FramingError):
    """Frame is too large."""

    def __init__(self, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(f"frame of {size} bytes exceeds the limit of {limit} bytes")


class UnknownOpcode(errors.ProtocolError):
    """Unknown opcode."""

    def __init__(self, opcode: int) -> None:
        self.opcode = opcode
        super().__init__(f"unknown opcode 0x{opcode:02x}")


class MalformedBody(errors.ProtocolError):
    """Frame body does not match its opcode's layout."""

    def __init__(self, opcode: int, reason: str) -> None:
        self.opcode = opcode
        self.reason = reason
        super().__init__(f"malformed {opcode_name(opcode)} body: {reason}")


class EncodeError(errors.ProtocolError):
    """A value cannot be encoded."""

    def __init__(self, opcode: int, reason: str) -> None:
        self.opcode = opcode
        self.reason = reason
        super().__init__(f"cannot encode {opcode_name(opcode)}: {reason}")
