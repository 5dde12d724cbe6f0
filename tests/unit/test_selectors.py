"""Selectors without a database: what parses (and what not, and where), the limits,
and that the jsonpath holds every literal as a variable and every name escaped."""

from __future__ import annotations

import json
import re
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from courier import errors, selectors
from courier.selectors import And, Compare, In, Not, Or, Present


@pytest.mark.parametrize(
    ("text", "tree"),
    [
        ("a = 'x'", Compare("a", "=", "x")),
        ("a <> 'it''s'", Compare("a", "<>", "it's")),
        ("a != 1", Compare("a", "<>", Decimal(1))),
        ("n >= -2.5e3", Compare("n", ">=", Decimal("-2.5e3"))),
        ("flag", Compare("flag", "=", True)),
        ("flag = false", Compare("flag", "=", False)),
        ('"unit price" < 10', Compare("unit price", "<", Decimal(10))),
        ('"a""b" = 1', Compare('a"b', "=", Decimal(1))),
        ('"AND" = 1', Compare("AND", "=", Decimal(1))),
        ("k in ('a', 2, TRUE)", In("k", ("a", Decimal(2), True))),
        ("k NOT IN ('a')", Not(In("k", ("a",)))),
        ("k IS NULL", Not(Present("k"))),
        ("k is not null", Present("k")),
        ("a = 1 OR b = 2 AND c = 3",
         Or(Compare("a", "=", Decimal(1)),
            And(Compare("b", "=", Decimal(2)), Compare("c", "=", Decimal(3))))),
        ("(a = 1 OR b = 2) AND NOT c", And(
            Or(Compare("a", "=", Decimal(1)), Compare("b", "=", Decimal(2))),
            Not(Compare("c", "=", True)))),
    ],
)  # fmt: skip
def test_what_parses_and_into_what(text: str, tree: selectors.Node) -> None:
    assert selectors.parse(text) == tree


@pytest.mark.parametrize(
    ("text", "position", "reason"),
    [
        ("", 0, "expected a property name"),
        ("a", None, None),  # a bare name parses
        ("a =", 3, "expected a literal"),
        ("a == 1", 3, "expected a literal"),
        ("a = 'open", 4, "an unclosed quote"),
        ('"open = 1', 0, "an unclosed quote"),
        ("a = 1 b = 2", 6, "expected AND, OR or the end"),
        ("a = 1 AND", 9, "expected a property name"),
        ("(a = 1", 6, "expected ')'"),
        ("a IN ()", 6, "expected a literal"),
        ("a IN (1,)", 8, "expected a literal"),
        ("a IN 1", 5, "expected '(' after IN"),
        ("a IS 1", 5, "expected NULL"),
        ("a < TRUE", 2, "a boolean compares only with = or <>"),
        ("1 = a", 0, "expected a property name"),
        ("a = b", 4, "expected a literal"),
        ("a = $v1", 4, "an unexpected character '$'"),
        ("a = 1; DROP TABLE t", 5, "an unexpected character ';'"),
        ("a = 1 -- comment", 6, "an unexpected character '-'"),
        ("$.a == 1", 0, "an unexpected character '$'"),
        ("@ == 1", 0, "an unexpected character '@'"),
        ("a like_regex 'x'", 2, "expected AND, OR or the end"),
        ("a = 1 || b = 2", 6, "an unexpected character '|'"),
        ("é = 'ü'", 0, "an unexpected character 'é'"),
        ('"" = 1', 0, "a property name is 1 to 255 bytes, not 0"),
        ("a = 1.", 4, "an unexpected character"),
        ("a = 1x", 4, "an unexpected character"),
        ("a = 'x\x00'", 6, "a NUL character"),
    ],
)
def test_what_is_refused_and_where(text: str, position: int | None, reason: str | None) -> None:
    if reason is None:
        selectors.parse(text)
        return
    with pytest.raises(errors.BadSelector) as raised:
        selectors.parse(text)
    assert raised.value.position == position, raised.value.message
    assert reason in raised.value.message
    assert f"at character {position + 1} " in raised.value.message
    assert raised.value.status == errors.Status.BAD_SELECTOR
    assert isinstance(raised.value, errors.BadRequest)


def test_the_limits() -> None:
    selectors.parse("a = '" + "x" * (selectors.MAX_SELECTOR_BYTES - 6) + "'")
    with pytest.raises(errors.BadSelector, match="1025 bytes; a selector is at most 1024"):
        selectors.parse("a = '" + "x" * (selectors.MAX_SELECTOR_BYTES - 5) + "'")
    deep = selectors.MAX_SELECTOR_DEPTH - 1
    selectors.parse("(" * deep + "a = 1" + ")" * deep)
    with pytest.raises(errors.BadSelector, match="nested deeper than 16"):
        selectors.parse("(" * (deep + 1) + "a = 1" + ")" * (deep + 1))
    with pytest.raises(errors.BadSelector, match="nested deeper than 16"):
        selectors.parse("NOT " * (deep + 1) + "a = 1")
    terms = selectors.MAX_SELECTOR_TERMS
    selectors.parse(" OR ".join(["a = 1"] * terms))
    with pytest.raises(errors.BadSelector, match="more than 64 terms"):
        selectors.parse(" OR ".join(["a = 1"] * (terms + 1)))
    with pytest.raises(errors.BadSelector, match="more than 64 terms"):
        selectors.parse("a IN (" + ", ".join(["1"] * (terms + 1)) + ")")
    with pytest.raises(errors.BadSelector, match="a number is at most 40 characters"):
        selectors.parse("a = " + "9" * 41)
    with pytest.raises(errors.BadSelector, match="a property name is 1 to 255 bytes, not 256"):
        selectors.parse("a" * 256 + " = 1")


# -- the jsonpath -------------------------------------------------------------------

JSONPATH_VARIABLE = re.compile(r"\$v[0-9]+")
KEY = re.compile(r'\$\."(?:[A-Za-z0-9_]|\\u\{[0-9a-f]+\})*"')


def skeleton(path: str) -> str:
    """The jsonpath with its keys and variables taken out: only syntax is left."""
    return JSONPATH_VARIABLE.sub("V", KEY.sub("K", path))


def test_literals_become_variables_and_names_escaped_keys() -> None:
    hostile = "'; DROP TABLE courier_messages; -- $ \" \\ @ || like_regex ü"
    quoted_name = '"' + hostile.replace('"', '""') + '"'
    text = quoted_name + " = '" + hostile.replace("'", "''") + "'"
    compiled = selectors.to_jsonpath(selectors.parse(text))
    assert skeleton(compiled.path) == "K == V"
    assert json.loads(compiled.vars) == {"v1": hostile}


@pytest.mark.parametrize(
    ("text", "path", "variables"),
    [
        ("a = 1", '$."a" == $v1', {"v1": 1}),
        ("NOT a < 1", '$."a" >= $v1', {"v1": 1}),
        ("NOT (a = 1 OR b <> 'x')", '($."a" != $v1 && $."b" == $v2)', {"v1": 1, "v2": "x"}),
        ("a NOT IN (1, 2)", '($."a" != $v1 && $."a" != $v2)', {"v1": 1, "v2": 2}),
        ("a IN (1, TRUE)", '($."a" == $v1 || $."a" == $v2)', {"v1": 1, "v2": True}),
        ("a IS NULL", '!(exists($."a"))', {}),
        ("NOT a IS NULL", 'exists($."a")', {}),
        ("NOT NOT a", '$."a" == $v1', {"v1": True}),
        ('"x.y z" = 0.5', '$."x\\u{2e}y\\u{20}z" == $v1', {"v1": 0.5}),
    ],
)
def test_the_jsonpath_of_a_selector(text: str, path: str, variables: dict[str, object]) -> None:
    compiled = selectors.to_jsonpath(selectors.parse(text))
    assert compiled.path == path
    assert json.loads(compiled.vars) == variables


@given(
    name=st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)),
                 min_size=1, max_size=20),
    literal=st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)),
                    max_size=20),
)  # fmt: skip
def test_any_name_and_text_stay_out_of_the_jsonpath_syntax(name: str, literal: str) -> None:
    quoted_name = '"' + name.replace('"', '""') + '"'
    quoted_literal = "'" + literal.replace("'", "''") + "'"
    tree = selectors.parse(f"{quoted_name} <> {quoted_literal} OR {quoted_name} IS NULL")
    compiled = selectors.to_jsonpath(tree)
    assert skeleton(compiled.path) == "(K != V || !(exists(K)))"
    assert json.loads(compiled.vars) == {"v1": literal}
    assert tree == Or(Compare(name, "<>", literal), Not(Present(name)))
