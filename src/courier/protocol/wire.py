"""Field-level encoding shared by every body: integers, names, blobs, enums, timestamps.

``Writer`` appends fields to a body; ``Reader`` takes them off one at a time and
raises ``MalformedBody`` (never struct.error or UnicodeDecodeError) on bad bytes.
"""

from __future__ import annotations

import struct
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from courier import errors, models
from courier.protocol import constants, exceptions

U8 = struct.Struct(">B")
U16 = struct.Struct(">H")
U32 = struct.Struct(">I")
I64 = struct.Struct(">q")
F64 = struct.Struct(">d")

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)
NO_PROPERTIES = b"\x00\x00"
"""A message without properties: a property count of 0."""

# Enums travel as one byte; these tables are the wire codes (docs/protocol.md).
MODE_CODES: dict[models.ClientMode, int] = {
    models.ClientMode.READ_WRITE: 0,
    models.ClientMode.READ_ONLY: 1,
    models.ClientMode.ADMIN: 2,
}
ORDER_CODES: dict[models.Order, int] = {models.Order.TIME: 0, models.Order.PRIORITY: 1}
OVERFLOW_CODES: dict[models.Overflow, int] = {
    models.Overflow.REFUSE: 0,
    models.Overflow.DROP_OLDEST: 1,
}
MODES_BY_CODE = {code: mode for mode, code in MODE_CODES.items()}
ORDERS_BY_CODE = {code: order for order, code in ORDER_CODES.items()}
OVERFLOWS_BY_CODE = {code: overflow for overflow, code in OVERFLOW_CODES.items()}
STATUSES_BY_CODE = {int(status): status for status in errors.Status}

E = TypeVar("E")


class Writer:
    """Builds one frame: room for the header first, then every method appends a field."""

    def __init__(self, opcode: int) -> None:
        self.opcode = opcode
        self.buffer = bytearray(constants.HEADER_SIZE)

    def fail(self, reason: str) -> exceptions.EncodeError:
        return exceptions.EncodeError(self.opcode, reason)

    def pack(self, codec: struct.Struct, value: int, field: str) -> None:
        try:
            self.buffer += codec.pack(value)
        except struct.error as exc:
            raise self.fail(f"{field}={value!r} does not fit ({exc})") from exc

    def u8(self, value: int, field: str) -> None:
        self.pack(U8, value, field)

    def u16(self, value: int, field: str) -> None:
        self.pack(U16, value, field)

    def u32(self, value: int, field: str) -> None:
        self.pack(U32, value, field)

    def i64(self, value: int, field: str) -> None:
        self.pack(I64, value, field)

    def boolean(self, value: bool, field: str) -> None:
        self.buffer.append(1 if value else 0)

    def optional_id(self, value: int | None, field: str) -> None:
        """Ids are positive, so 0 stands for 'none'."""
        if value is not None and value <= 0:
            raise self.fail(f"{field}={value!r}: ids are positive")
        self.i64(value or 0, field)

    def optional_i64(self, value: int | None, field: str) -> None:
        """A presence byte, then the i64 only when present."""
        if value is None:
            self.buffer.append(0)
        else:
            self.buffer.append(1)
            self.i64(value, field)

    def optional_u32(self, value: int | None, field: str) -> None:
        """0 stands for 'none', so a present value must be positive."""
        if value is not None and value <= 0:
            raise self.fail(f"{field}={value!r} must be positive (None for none)")
        self.u32(value or 0, field)

    def name(self, value: str, field: str) -> None:
        """UTF-8 with a u16 length."""
        try:
            data = value.encode()
        except (UnicodeEncodeError, AttributeError) as exc:
            raise self.fail(f"{field} is not encodable text ({exc})") from exc
        self.pack(U16, len(data), f"len({field})")
        self.buffer += data

    def optional_name(self, value: str | None, field: str) -> None:
        """An empty name stands for 'none', so a present value must not be empty."""
        if value == "":
            raise self.fail(f"{field} is empty (None for none)")
        self.name(value or "", field)

    def blob(self, value: bytes, field: str) -> None:
        """Raw bytes with a u32 length: message bodies are opaque, any content goes."""
        if not isinstance(value, bytes | bytearray):
            raise self.fail(f"{field} must be bytes, not {type(value).__name__}")
        self.pack(U32, len(value), f"len({field})")
        self.buffer += value

    def properties(self, value: models.Properties, field: str) -> None:
        """A u16 count, then each key as a name and its value as a tag byte and the
        value in that type (see MAX_PROPERTIES and PropertyType)."""
        if not value:
            self.buffer += NO_PROPERTIES
            return
        problem = constants.properties_problem(value)
        if problem:
            raise self.fail(f"{field}: {problem}")
        self.u16(len(value), f"len({field})")
        for key, item in value.items():
            self.name(key, f"{field} key")
            self.property_value(item, f"{field}[{key!r}]")

    def property_value(self, value: models.PropertyValue, field: str) -> None:
        """A checked value (see ``properties``): its tag, then its bytes."""
        if isinstance(value, str):
            self.buffer.append(constants.PropertyType.TEXT)
            self.name(value, field)
        elif isinstance(value, bool):
            self.buffer.append(constants.PropertyType.BOOLEAN)
            self.boolean(value, field)
        elif isinstance(value, int):
            self.buffer.append(constants.PropertyType.INTEGER)
            self.i64(value, field)
        else:
            self.buffer.append(constants.PropertyType.FLOAT)
            self.buffer += F64.pack(value)

    def timestamp(self, value: datetime, field: str) -> None:
        try:
            micros = (value - EPOCH) // MICROSECOND
        except TypeError as exc:
            raise self.fail(f"{field} must be a timezone-aware datetime") from exc
        self.i64(micros, field)


class Reader:
    """Reads one body from the start; ``finish`` insists that nothing is left over."""

    def __init__(self, opcode: int, body: bytes, offset: int = 0) -> None:
        self.opcode = opcode
        self.body = body
        self.offset = offset

    def fail(self, reason: str) -> exceptions.MalformedBody:
        return exceptions.MalformedBody(self.opcode, reason)

    def take(self, count: int, field: str) -> bytes:
        end = self.offset + count
        if end > len(self.body):
            raise self.fail(f"body ends inside {field} (needs {end} bytes, has {len(self.body)})")
        chunk = self.body[self.offset : end]
        self.offset = end
        return chunk

    def unpack(self, codec: struct.Struct, field: str) -> int:
        value: int = codec.unpack(self.take(codec.size, field))[0]
        return value

    def fields(self, codec: struct.Struct, what: str) -> tuple[int, ...]:
        """Several fixed-size integer fields at once (the hot layouts read this way)."""
        end = self.offset + codec.size
        if end > len(self.body):
            raise self.fail(f"body ends inside {what} (needs {end} bytes, has {len(self.body)})")
        values: tuple[int, ...] = codec.unpack_from(self.body, self.offset)
        self.offset = end
        return values

    def u8(self, field: str) -> int:
        return self.unpack(U8, field)

    def u16(self, field: str) -> int:
        return self.unpack(U16, field)

    def u32(self, field: str) -> int:
        return self.unpack(U32, field)

    def i64(self, field: str) -> int:
        return self.unpack(I64, field)

    def boolean(self, field: str) -> bool:
        return self.as_boolean(self.u8(field), field)

    def as_boolean(self, value: int, field: str) -> bool:
        if value > 1:
            raise self.fail(f"{field} is {value}; a boolean must be 0 or 1")
        return value == 1

    def optional_id(self, field: str) -> int | None:
        return self.i64(field) or None

    def optional_i64(self, field: str) -> int | None:
        return self.i64(field) if self.boolean(f"{field} presence") else None

    def optional_u32(self, field: str) -> int | None:
        return self.u32(field) or None

    def name(self, field: str) -> str:
        return self.text(self.take(self.u16(f"len({field})"), field), field)

    def text(self, data: bytes, field: str) -> str:
        try:
            return data.decode()
        except UnicodeDecodeError as exc:
            raise self.fail(
                f"{field} is not valid UTF-8 ({exc.reason} at byte {exc.start})"
            ) from exc

    def optional_name(self, field: str) -> str | None:
        return self.name(field) or None

    def blob(self, field: str) -> bytes:
        return self.take(self.u32(f"len({field})"), field)

    def properties(self, field: str) -> dict[str, models.PropertyValue]:
        """Refused when over a limit or a key repeats, before the next is read."""
        count = self.u16(f"len({field})")
        if count > constants.MAX_PROPERTIES:
            raise self.fail(f"{field}: {count} properties; at most {constants.MAX_PROPERTIES}")
        properties: dict[str, models.PropertyValue] = {}
        if not count:  # most messages carry none: nothing to check
            return properties
        for _ in range(count):
            key = self.name(f"{field} key")
            if not 0 < len(key.encode()) <= constants.MAX_PROPERTY_KEY_BYTES:
                raise self.fail(
                    f"{field}: a key is 1 to {constants.MAX_PROPERTY_KEY_BYTES} bytes of UTF-8"
                )
            if key in properties:
                raise self.fail(f"{field}: key {key!r} is given twice")
            properties[key] = self.property_value(f"{field}[{key!r}]")
        problem = constants.properties_problem(properties)  # NULs, floats, the total size
        if problem:
            raise self.fail(f"{field}: {problem}")
        return properties

    def property_value(self, field: str) -> models.PropertyValue:
        """A tag byte, then the value in that type."""
        tag = self.u8(f"{field} type")
        if tag == constants.PropertyType.TEXT:
            size = self.u16(f"len({field})")
            if size > constants.MAX_PROPERTY_VALUE_BYTES:
                raise self.fail(
                    f"{field} is {size} bytes; at most {constants.MAX_PROPERTY_VALUE_BYTES}"
                )
            return self.text(self.take(size, field), field)
        if tag == constants.PropertyType.INTEGER:
            return self.i64(field)
        if tag == constants.PropertyType.FLOAT:
            value: float = F64.unpack(self.take(F64.size, field))[0]
            return value
        if tag == constants.PropertyType.BOOLEAN:
            return self.boolean(field)
        raise self.fail(
            f"{field} type 0x{tag:02x} is unknown (t text, i integer, f float, b boolean;"
            " a revision-3 client sends none)"
        )

    def timestamp(self, field: str) -> datetime:
        return self.as_timestamp(self.i64(field), field)

    def as_timestamp(self, micros: int, field: str) -> datetime:
        try:
            return EPOCH + micros * MICROSECOND
        except OverflowError as exc:
            raise self.fail(f"{field}={micros} µs is outside the datetime range") from exc

    def mode(self, field: str) -> models.ClientMode:
        return self.enum(MODES_BY_CODE, field)

    def order(self, field: str) -> models.Order:
        return self.enum(ORDERS_BY_CODE, field)

    def overflow(self, field: str) -> models.Overflow:
        return self.enum(OVERFLOWS_BY_CODE, field)

    def status(self, field: str) -> errors.Status:
        return self.enum(STATUSES_BY_CODE, field)

    def enum(self, table: dict[int, E], field: str) -> E:
        code = self.u8(field)
        try:
            return table[code]
        except KeyError:
            raise self.fail(f"{field} code {code} is unknown") from None

    def finish(self) -> None:
        extra = len(self.body) - self.offset
        if extra:
            raise self.fail(f"{extra} trailing bytes after the body")


def write_code(writer: Writer, codes: dict[E, int], value: E, field: str) -> None:
    """One byte for an enum member, from its table of codes."""
    code = codes.get(value)
    if code is None:
        kind = type(next(iter(codes))).__name__
        raise writer.fail(f"{field}={value!r} is not a {kind}")
    writer.buffer.append(code)


def write_mode(writer: Writer, mode: models.ClientMode, field: str) -> None:
    write_code(writer, MODE_CODES, mode, field)


def write_order(writer: Writer, order: models.Order, field: str) -> None:
    write_code(writer, ORDER_CODES, order, field)
