"""docs/measurements.md documents every field of every record kind."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest

from courier.measurements import record_schema

DOC = Path(__file__).resolve().parents[2] / "docs" / "measurements.md"


def kind_section(kind: str) -> str:
    text = DOC.read_text()
    match = re.search(rf"^### {kind}\n(.*?)(?=^#{{2,3}} )", text, re.S | re.M)
    assert match, f"no section for {kind}"
    return match.group(1)


def type_name(type_: pa.DataType) -> str:
    """As the page spells types: float64, list<int64>."""
    if pa.types.is_list(type_):
        return f"list<{type_name(type_.value_type)}>"
    return str(type_).replace("double", "float64")


@pytest.mark.parametrize("kind", sorted(record_schema.FIELDS))
def test_every_field_has_a_row_in_its_kinds_table(kind: str) -> None:
    rows = re.findall(r"^\| `(\w+)` \| ([\w<>]+) \|", kind_section(kind), re.M)
    expected = [(f.name, type_name(f.type)) for f in record_schema.FIELDS[kind]]
    assert rows == expected


def test_clock_alignment_has_its_section() -> None:
    assert re.search(r"^## Clock alignment$", DOC.read_text(), re.M)
