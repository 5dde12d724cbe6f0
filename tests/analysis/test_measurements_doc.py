"""docs/measurements.md documents every field of every record kind."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from courier.measurements import record_schema

DOC = Path(__file__).resolve().parents[2] / "docs" / "measurements.md"


def kind_section(kind: str) -> str:
    text = DOC.read_text()
    match = re.search(rf"^### {kind}\n(.*?)(?=^#{{2,3}} )", text, re.S | re.M)
    assert match, f"no section for {kind}"
    return match.group(1)


@pytest.mark.parametrize("kind", sorted(record_schema.FIELDS))
def test_every_field_has_a_row_in_its_kinds_table(kind: str) -> None:
    rows = re.findall(r"^\| `(\w+)` \| (\w+) \|", kind_section(kind), re.M)
    expected = [
        (f.name, str(f.type).replace("double", "float64")) for f in record_schema.FIELDS[kind]
    ]
    assert rows == expected


def test_clock_alignment_has_its_section() -> None:
    assert re.search(r"^## Clock alignment$", DOC.read_text(), re.M)
