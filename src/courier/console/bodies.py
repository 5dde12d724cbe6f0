"""How a message body (any bytes) is shown: as text when it is UTF-8 text, else as
hex, marked binary. Lists show a preview of the first bytes; the message page all.

    >>> show(b"hello", size=5)
    Shown(text='hello', binary=False)
    >>> show(b"\\x00\\xffA", size=3)
    Shown(text='00 ff 41', binary=True)
"""

from __future__ import annotations

import base64
import codecs
import re
from dataclasses import dataclass

DUMP_WIDTH = 16  # bytes per line of a hex dump
# Control characters other than tab, newline and carriage return: a body holding
# one (NUL, say) is data, not text, even when it is valid UTF-8.
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


@dataclass(frozen=True, slots=True)
class Shown:
    text: str  # the body as text, or as hex when binary
    binary: bool


def as_text(data: bytes, complete: bool) -> str | None:
    """The bytes as text, or None when they are not UTF-8 text. A prefix that is not
    ``complete`` may end inside a character, which is left out."""
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(data, final=complete)
    except UnicodeDecodeError:
        return None
    return None if CONTROL.search(text) else text


def show(data: bytes, size: int, *, dump: bool = False) -> Shown:
    """``data`` is the body, or its first bytes when ``size`` (the whole body's
    length) is larger. Binary bodies print as spaced hex, or with ``dump`` as a
    hex dump with offsets and the printable bytes alongside."""
    text = as_text(data, complete=len(data) >= size)
    if text is not None:
        return Shown(text, binary=False)
    return Shown(hex_dump(data) if dump else data.hex(" "), binary=True)


def hex_dump(data: bytes) -> str:
    """Like ``hexdump -C``: offset, sixteen bytes in hex, the same bytes as ASCII."""
    return "\n".join(dump_line(data, at) for at in range(0, len(data), DUMP_WIDTH))


def dump_line(data: bytes, at: int) -> str:
    chunk = data[at : at + DUMP_WIDTH]
    halves = (chunk[:8].hex(" "), chunk[8:].hex(" "))
    hex_part = "  ".join(half for half in halves if half)
    ascii_part = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in chunk)
    return f"{at:08x}  {hex_part:<48}  |{ascii_part}|"


def base64_text(data: bytes) -> str:
    """The exact bytes for the JSON API (JSON has no bytes)."""
    return base64.b64encode(data).decode("ascii")
