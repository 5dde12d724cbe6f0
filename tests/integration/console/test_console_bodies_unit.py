"""How a body is shown, without a database: text, a preview cut inside a character,
and binary data as spaced hex or as a hex dump."""

from __future__ import annotations

import pytest

from courier.console import bodies


@pytest.mark.parametrize(
    ("data", "size", "expected"),
    [
        (b"hello\tworld\r\n", 13, bodies.Shown("hello\tworld\r\n", binary=False)),
        (b"", 0, bodies.Shown("", binary=False)),
        ("naïve ✓".encode(), 10, bodies.Shown("naïve ✓", binary=False)),
        ("aé".encode()[:2], 3, bodies.Shown("a", binary=False)),  # a preview cut inside é
        ("aé".encode()[:2], 2, bodies.Shown("61 c3", binary=True)),  # a whole body ending so
        (b"a\x00b", 3, bodies.Shown("61 00 62", binary=True)),
        (b"\xff", 1, bodies.Shown("ff", binary=True)),
        ("\u0085".encode(), 2, bodies.Shown("c2 85", binary=True)),  # a C1 control
    ],
)
def test_show(data: bytes, size: int, expected: bodies.Shown) -> None:
    assert bodies.show(data, size) == expected


def test_a_binary_body_in_full_is_a_hex_dump() -> None:
    data = bytes(range(0x1E, 0x3E)) + b"\xff"
    assert bodies.show(data, len(data), dump=True).text == (
        "00000000  1e 1f 20 21 22 23 24 25  26 27 28 29 2a 2b 2c 2d  |.. !\"#$%&'()*+,-|\n"
        "00000010  2e 2f 30 31 32 33 34 35  36 37 38 39 3a 3b 3c 3d  |./0123456789:;<=|\n"
        "00000020  ff                                                |.|"
    )
    assert bodies.hex_dump(b"") == ""


def test_base64_text() -> None:
    assert bodies.base64_text(b"\x00\xff") == "AP8="
