"""Selectors: which messages a read may take, by their properties (docs/selectors.md).

A selector is a small boolean expression over a message's properties::

    kind = 'order' AND (amount >= 100 OR rush) AND region NOT IN ('north', 'east')

``parse`` turns the text into a tree of frozen nodes, or raises
``errors.BadSelector`` naming the character where it failed. ``to_jsonpath`` turns the
tree into a PostgreSQL jsonpath predicate whose literals are all variables
(``$v1``, ``$v2``...) passed apart as jsonb, and whose property names are quoted
with every character but letters, digits and ``_`` escaped: no text of the selector
reaches SQL or jsonpath syntax as it was written. ``evaluate`` is the reference: the
same tree judged in Python, in the three-valued logic of SQL (a comparison with a
missing property or one of another type is unknown, and unknown is not selected).
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import TypeAlias

from courier import errors

MAX_SELECTOR_BYTES = 1024
"""A selector is at most this many bytes of UTF-8."""

MAX_SELECTOR_DEPTH = 16
"""Parentheses and NOTs nest at most this deep."""

MAX_SELECTOR_TERMS = 64
"""Comparisons, IN list items and presence tests in one selector, at most."""

MAX_NAME_BYTES = 255
"""A property name is 1 to this many bytes of UTF-8, as a property key."""

MAX_NUMBER_CHARS = 40
"""A number literal is at most this many characters."""

Literal: TypeAlias = str | Decimal | bool
"""A literal of a selector: text, a number (exact), or a boolean."""

KEYWORDS = frozenset({"AND", "OR", "NOT", "IN", "IS", "NULL", "TRUE", "FALSE"})
COMPARISONS = ("=", "<>", "<", "<=", ">", ">=")
NEGATED = {"=": "<>", "<>": "=", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}
JSONPATH_OPERATORS = {"=": "==", "<>": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


# -- the tree ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Compare:
    """``name op literal``; a bare boolean name is ``name = TRUE``."""

    name: str
    op: str
    literal: Literal


@dataclass(frozen=True, slots=True)
class In:
    """``name IN (literals)``: an OR of equalities."""

    name: str
    literals: tuple[Literal, ...]


@dataclass(frozen=True, slots=True)
class Present:
    """``name IS NOT NULL``: the message has the property (never unknown)."""

    name: str


@dataclass(frozen=True, slots=True)
class Not:
    operand: Node


@dataclass(frozen=True, slots=True)
class And:
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Or:
    left: Node
    right: Node


Node: TypeAlias = Compare | In | Present | Not | And | Or


# -- tokens -----------------------------------------------------------------------

TOKEN = re.compile(
    r"""
    (?P<space>\s+)
    | (?P<text>'(?:[^']|'')*')
    | (?P<quoted>"(?:[^"]|"")*")
    | (?P<number>-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?![\w.]))
    | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<op><>|!=|<=|>=|=|<|>)
    | (?P<punct>[(),])
    """,
    re.VERBOSE,
)


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # text, quoted, number, word, keyword, op, punct, end
    value: str
    position: int  # 0-based character offset in the selector


def tokens(selector: str) -> list[Token]:
    """The selector cut into tokens, ending with an ``end`` token."""
    found: list[Token] = []
    position = 0
    while position < len(selector):
        match = TOKEN.match(selector, position)
        if match is None:
            what = "an unclosed quote" if selector[position] in "'\"" else "an unexpected character"
            raise fail(selector, position, f"{what} {selector[position]!r}")
        kind = match.lastgroup or ""
        if kind != "space":
            value = match.group()
            if kind == "word" and value.upper() in KEYWORDS:
                kind, value = "keyword", value.upper()
            found.append(Token(kind, value, position))
        position = match.end()
    found.append(Token("end", "", len(selector)))
    return found


def fail(selector: str, position: int, reason: str) -> errors.BadSelector:
    """BadSelector for ``reason`` at a 0-based character position."""
    near = selector[position : position + 20]
    where = f"near {near!r}" if near else "at the end"
    return errors.BadSelector(
        f"bad selector: {reason} at character {position + 1} ({where})", position=position
    )


# -- parsing ----------------------------------------------------------------------


def parse(selector: str) -> Node:
    """The selector's tree; BadSelector when it does not parse or passes a limit.

    >>> parse("kind = 'order' AND amount >= 100")
    And(left=Compare(name='kind', op='=', literal='order'), right=Compare(name='amount', op='>=', literal=Decimal('100')))
    """  # noqa: E501
    size = len(selector.encode(errors="surrogatepass"))
    if size > MAX_SELECTOR_BYTES:
        raise errors.BadSelector(
            f"bad selector: {size} bytes; a selector is at most {MAX_SELECTOR_BYTES}"
        )
    if "\x00" in selector:
        raise fail(selector, selector.index("\x00"), "a NUL character")
    parser = _Parser(selector, tokens(selector))
    node = parser.disjunction(0)
    parser.expect_end()
    return node


class _Parser:
    """Recursive descent: OR over AND over NOT over predicates and parentheses."""

    def __init__(self, selector: str, found: list[Token]) -> None:
        self.selector = selector
        self.tokens = found
        self.index = 0
        self.terms = 0

    @property
    def current(self) -> Token:
        return self.tokens[self.index]

    def advance(self) -> Token:
        token = self.current
        self.index += 1
        return token

    def fail(self, reason: str, token: Token | None = None) -> errors.BadSelector:
        return fail(self.selector, (token or self.current).position, reason)

    def at(self, kind: str, value: str | None = None) -> bool:
        token = self.current
        return token.kind == kind and (value is None or token.value == value)

    def take(self, kind: str, value: str, what: str) -> Token:
        if not self.at(kind, value):
            raise self.fail(f"expected {what}")
        return self.advance()

    def expect_end(self) -> None:
        if not self.at("end"):
            raise self.fail("expected AND, OR or the end")

    def disjunction(self, depth: int) -> Node:
        node = self.conjunction(depth)
        while self.at("keyword", "OR"):
            self.advance()
            node = Or(node, self.conjunction(depth))
        return node

    def conjunction(self, depth: int) -> Node:
        node = self.negation(depth)
        while self.at("keyword", "AND"):
            self.advance()
            node = And(node, self.negation(depth))
        return node

    def negation(self, depth: int) -> Node:
        if depth >= MAX_SELECTOR_DEPTH:
            raise self.fail(f"nested deeper than {MAX_SELECTOR_DEPTH}")
        if self.at("keyword", "NOT"):
            self.advance()
            return Not(self.negation(depth + 1))
        if self.at("punct", "("):
            self.advance()
            node = self.disjunction(depth + 1)
            self.take("punct", ")", "')'")
            return node
        return self.predicate()

    def predicate(self) -> Node:
        name = self.name()
        token = self.current
        if token.kind == "op":
            self.advance()
            op = "<>" if token.value == "!=" else token.value
            literal = self.literal()
            if isinstance(literal, bool) and op not in ("=", "<>"):
                raise self.fail("a boolean compares only with = or <>", token)
            self.count_term()
            return Compare(name, op, literal)
        if token.kind == "keyword" and token.value in ("IN", "NOT"):
            return self.membership(name)
        if token.kind == "keyword" and token.value == "IS":
            return self.presence(name)
        self.count_term()
        return Compare(name, "=", True)  # a bare boolean property

    def membership(self, name: str) -> Node:
        negated = self.at("keyword", "NOT")
        if negated:
            self.advance()
        self.take("keyword", "IN", "IN")
        self.take("punct", "(", "'(' after IN")
        literals = [self.literal()]
        self.count_term()
        while self.at("punct", ","):
            self.advance()
            literals.append(self.literal())
            self.count_term()
        self.take("punct", ")", "',' or ')'")
        node: Node = In(name, tuple(literals))
        return Not(node) if negated else node

    def presence(self, name: str) -> Node:
        self.advance()  # IS
        negated = self.at("keyword", "NOT")
        if negated:
            self.advance()
        self.take("keyword", "NULL", "NULL after IS [NOT]")
        self.count_term()
        return Present(name) if negated else Not(Present(name))

    def count_term(self) -> None:
        """One more term against the limit (an IN list counts each item)."""
        self.terms += 1
        if self.terms > MAX_SELECTOR_TERMS:
            raise self.fail(f"more than {MAX_SELECTOR_TERMS} terms")

    def name(self) -> str:
        token = self.current
        if token.kind == "word":
            name = token.value
        elif token.kind == "quoted":
            name = token.value[1:-1].replace('""', '"')
        else:
            raise self.fail("expected a property name")
        size = len(name.encode(errors="surrogatepass"))
        if not 1 <= size <= MAX_NAME_BYTES:
            raise self.fail(f"a property name is 1 to {MAX_NAME_BYTES} bytes, not {size}")
        self.advance()
        return name

    def literal(self) -> Literal:
        token = self.current
        if token.kind == "text":
            self.advance()
            return token.value[1:-1].replace("''", "'")
        if token.kind == "number":
            if len(token.value) > MAX_NUMBER_CHARS:
                raise self.fail(f"a number is at most {MAX_NUMBER_CHARS} characters")
            self.advance()
            return Decimal(token.value)
        if token.kind == "keyword" and token.value in ("TRUE", "FALSE"):
            self.advance()
            return token.value == "TRUE"
        raise self.fail("expected a literal ('text', a number, TRUE or FALSE)")


# -- the reference evaluator -------------------------------------------------------

Truth: TypeAlias = bool | None
"""True, False, or None for unknown."""


def selects(node: Node, properties: Mapping[str, object]) -> bool:
    """Whether a message with these properties is selected: its value is TRUE."""
    return evaluate(node, properties) is True


def evaluate(node: Node, properties: Mapping[str, object]) -> Truth:
    """The node's value in SQL's three-valued logic (None: unknown)."""
    match node:
        case Compare(name=name, op=op, literal=literal):
            return compare(properties.get(name, _MISSING), op, literal)
        case In(name=name, literals=literals):
            return _any(compare(properties.get(name, _MISSING), "=", item) for item in literals)
        case Present(name=name):
            return name in properties
        case Not(operand=operand):
            value = evaluate(operand, properties)
            return None if value is None else not value
        case And(left=left, right=right):
            return _all((evaluate(left, properties), evaluate(right, properties)))
        case Or(left=left, right=right):
            return _any((evaluate(left, properties), evaluate(right, properties)))
    raise TypeError(f"not a selector node: {node!r}")


_MISSING = object()


def compare(value: object, op: str, literal: Literal) -> Truth:
    """One comparison; unknown when the property is missing or of another type.
    Numbers compare exactly, as PostgreSQL's numeric does (a float by the shortest
    decimal that reads back as it)."""
    left, right = _comparable(value), _comparable(literal)
    if left is None or right is None or type(left) is not type(right):
        return None
    if op == "=":
        return left == right
    if op == "<>":
        return left != right
    return bool(_ORDER[op](left, right))


_ORDER = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def _comparable(value: object) -> str | Decimal | bool | None:
    if isinstance(value, bool | str | Decimal):
        return value
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(repr(value))
    return None


def _any(values: Iterable[Truth]) -> Truth:
    seen = list(values)
    if True in seen:
        return True
    return None if None in seen else False


def _all(values: Iterable[Truth]) -> Truth:
    seen = list(values)
    if False in seen:
        return False
    return None if None in seen else True


# -- compiling to jsonpath ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Compiled:
    """A selector as PostgreSQL takes it: ``jsonb_path_match(properties, path, vars)``."""

    path: str
    vars: str  # jsonb text: {"v1": literal, ...}


def to_jsonpath(node: Node) -> Compiled:
    """A jsonpath predicate true exactly when the selector selects.

    NOTs are pushed down to the comparisons first (NOT a = 1 is a <> 1, NOT IN is an
    AND of <>, IS NULL is NOT exists): without a NOT above them, the false of a
    missing property in jsonpath and the unknown of SQL select the same messages.

    >>> to_jsonpath(parse("kind = 'order' AND NOT amount < 5"))
    Compiled(path='($."kind" == $v1 && $."amount" >= $v2)', vars='{"v1": "order", "v2": 5}')
    """
    emitter = _Emitter()
    path = emitter.emit(push_not(node, negate=False))
    return Compiled(path, "{" + ", ".join(emitter.variables) + "}")


def push_not(node: Node, *, negate: bool) -> Node:
    """The same selector with NOT only directly above Present (``IS NULL``)."""
    match node:
        case Compare(name=name, op=op, literal=literal):
            return Compare(name, NEGATED[op], literal) if negate else node
        case In(name=name, literals=literals) if negate:
            parts: list[Node] = [Compare(name, "<>", item) for item in literals]
            result = parts[0]
            for part in parts[1:]:
                result = And(result, part)
            return result
        case In() | Present():
            return Not(node) if negate else node
        case Not(operand=operand):
            return push_not(operand, negate=not negate)
        case And(left=left, right=right):
            pair = (push_not(left, negate=negate), push_not(right, negate=negate))
            return Or(*pair) if negate else And(*pair)
        case Or(left=left, right=right):
            pair = (push_not(left, negate=negate), push_not(right, negate=negate))
            return And(*pair) if negate else Or(*pair)
    raise TypeError(f"not a selector node: {node!r}")


class _Emitter:
    def __init__(self) -> None:
        self.variables: list[str] = []

    def variable(self, literal: Literal) -> str:
        name = f"v{len(self.variables) + 1}"
        self.variables.append(f'"{name}": {literal_json(literal)}')
        return "$" + name

    def emit(self, node: Node) -> str:
        match node:
            case Compare(name=name, op=op, literal=literal):
                return f"{key_path(name)} {JSONPATH_OPERATORS[op]} {self.variable(literal)}"
            case In(name=name, literals=literals):
                path = key_path(name)
                return "(" + " || ".join(f"{path} == {self.variable(x)}" for x in literals) + ")"
            case Present(name=name):
                return f"exists({key_path(name)})"
            case Not(operand=Present() as present):
                return f"!({self.emit(present)})"
            case And(left=left, right=right):
                return f"({self.emit(left)} && {self.emit(right)})"
            case Or(left=left, right=right):
                return f"({self.emit(left)} || {self.emit(right)})"
        raise TypeError(f"not a selector node in negation normal form: {node!r}")


def key_path(name: str) -> str:
    """``$."name"``, every character but ASCII letters, digits and ``_`` escaped.

    >>> key_path('a"b\\\\c')
    '$."a\\\\u{22}b\\\\u{5c}c"'
    """
    escaped = "".join(c if c.isascii() and (c.isalnum() or c == "_") else f"\\u{{{ord(c):x}}}"
                      for c in name)  # fmt: skip
    return f'$."{escaped}"'


def literal_json(literal: Literal) -> str:
    """A literal as JSON: text escaped by json, a number as its exact decimal."""
    if isinstance(literal, Decimal):
        return str(literal)
    return json.dumps(literal)


def prepare(selector: str | None) -> Compiled | None:
    """A selector from the wire, parsed and compiled (None: no filter)."""
    return None if selector is None else to_jsonpath(parse(selector))
