"""Typed properties and selectors in the database tier: every type round-trips
exactly, a selective read takes exactly the messages the Python reference evaluator
chooses, in read order, and what a selector holds never becomes SQL or jsonpath."""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
from collections.abc import Coroutine
from decimal import Decimal
from typing import Any, TypeVar

import asyncpg
import pytest
from db_helpers import LONG
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from courier import errors, models, selectors
from courier.db import batching, repository
from helpers.properties import TYPED, typed

T = TypeVar("T")


def options(properties: models.Properties) -> repository.SendOptions:
    return repository.SendOptions(properties=properties)


def compiled(selector: str) -> selectors.Compiled:
    return selectors.to_jsonpath(selectors.parse(selector))


async def test_every_type_of_property_comes_back_as_it_was_sent(
    repo: repository.Repository, writer: models.ClientInfo, reader: models.ClientInfo,
    queue: models.Queue,
) -> None:  # fmt: skip
    await repo.send(writer.id, [queue.id], b"one", options=options(TYPED))
    await repo.send_many(writer.id, [queue.id], [models.Draft(b"two", properties=TYPED)])
    first = await repo.read(reader.id, queue_id=queue.id, pop=True)
    (second,) = await repo.pop_many(reader.id, queue.id, 10)
    assert typed(first.properties) == typed(TYPED)
    assert typed(second.properties) == typed(TYPED)
    assert first.properties["on"] is True and first.properties["zero"] == 0
    assert type(first.properties["zero"]) is int and type(first.properties["whole"]) is float


async def test_a_selector_takes_only_matching_messages_and_leaves_the_rest_in_order(
    repo: repository.Repository, writer: models.ClientInfo, reader: models.ClientInfo,
    queue: models.Queue, instance: int,
) -> None:  # fmt: skip
    for body, kind, amount in [(b"1", "order", 5), (b"2", "invoice", 500), (b"3", "order", 150)]:
        await repo.send(writer.id, [queue.id], body, options=options({"kind": kind, "n": amount}))
    big_order = compiled("kind = 'order' AND n > 100")
    peeked = await repo.read(reader.id, queue_id=queue.id, selector=big_order)
    leased = await repo.read(
        reader.id, queue_id=queue.id, pop=True, selector=big_order,
        lease=repository.Lease(LONG, instance),
    )  # fmt: skip
    assert (peeked.body, leased.body, leased.deliveries) == (b"3", b"3", 1)
    assert leased.delivery is not None
    with pytest.raises(errors.QueueEmpty):
        await repo.read(reader.id, queue_id=queue.id, pop=True, selector=big_order)
    rest = await repo.pop_many(reader.id, queue.id, 10)
    assert [m.body for m in rest] == [b"1", b"2"]
    await repo.ack(reader.id, leased.delivery)


async def test_priority_order_and_addressing_hold_under_a_selector(
    repo: repository.Repository, writer: models.ClientInfo, reader: models.ClientInfo,
    queue: models.Queue,
) -> None:  # fmt: skip
    other = await repo.register_client("other")
    sends = [
        (b"low", 2, None),
        (b"high", 9, None),
        (b"mine", 5, reader.id),
        (b"theirs", 10, other.id),
    ]
    for body, priority, receiver in sends:
        await repo.send(writer.id, [queue.id], body, receiver=receiver, priority=priority,
                        options=options({"k": 1}))  # fmt: skip
    every = compiled("k = 1")
    taken = await repo.pop_many(
        reader.id, queue.id, 10, order=models.Order.PRIORITY, selector=every
    )
    assert [m.body for m in taken] == [b"high", b"mine", b"low"]


async def test_reading_by_sender_keeps_its_meaning_with_a_selector(
    repo: repository.Repository, writer: models.ClientInfo, reader: models.ClientInfo,
    queue: models.Queue,
) -> None:  # fmt: skip
    second = await repo.register_client("second")
    await repo.send(writer.id, [queue.id], b"w", options=options({"k": 1}))
    await repo.send(second.id, [queue.id], b"s", options=options({"k": 1}))
    message = await repo.read(reader.id, sender_id=second.id, pop=True, selector=compiled("k = 1"))
    assert message.body == b"s"
    with pytest.raises(errors.NoMessage):
        await repo.read(reader.id, sender_id=second.id, pop=True, selector=compiled("k = 1"))


async def test_the_batched_repository_takes_selective_reads_alone(
    batched_repo: batching.BatchedRepository, writer: models.ClientInfo,
    reader: models.ClientInfo, queue: models.Queue,
) -> None:  # fmt: skip
    batched = batched_repo
    await batched.send(writer.id, [queue.id], b"a", options=options({"n": 1}))
    await batched.send(writer.id, [queue.id], b"b", options=options({"n": 2}))
    plain, selected = await asyncio.gather(
        batched.read(reader.id, queue_id=queue.id, pop=True),
        batched.read(reader.id, queue_id=queue.id, pop=True, selector=compiled("n = 2")),
    )
    assert (plain.body, selected.body) == (b"a", b"b")


# -- the reference evaluator against PostgreSQL -------------------------------------

KEYS = ("a", "b", "c d")
VALUES = st.one_of(
    st.sampled_from(["", "x", "y", "X", "é", "10", "true"]),
    st.integers(-3, 3),
    st.sampled_from([-1.5, 0.0, 0.5, 2.0, 1e20, 2**53 + 1]),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
)
PROPERTY_MAPS = st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=3)
LITERALS = st.one_of(
    st.sampled_from(["''", "'x'", "'y'", "'é'", "'10'", "'it''s'", "TRUE", "FALSE"]),
    st.integers(-3, 3).map(str),
    st.sampled_from(
        [
            "-1.5",
            "0.0",
            "0.5",
            "2",
            "1e20",
            "100000000000000000000.0",
            "9007199254740993",
            "9223372036854775807",
        ]
    ),
)
NAMES = st.sampled_from(["a", "b", '"c d"', "missing"])


def _comparison(draw: st.DrawFn) -> str:
    name, literal = draw(NAMES), draw(LITERALS)
    if literal in ("TRUE", "FALSE"):
        return f"{name} {draw(st.sampled_from(['=', '<>']))} {literal}"
    return f"{name} {draw(st.sampled_from(['=', '<>', '<', '<=', '>', '>=']))} {literal}"


@st.composite
def selector_texts(draw: st.DrawFn, depth: int = 0) -> str:
    """Random selectors over the keys above, nested up to three levels."""
    kinds = ["compare", "in", "null", "bare"] + (["and", "or", "not"] if depth < 3 else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "compare":
        return _comparison(draw)
    if kind == "in":
        items = draw(st.lists(LITERALS.filter(lambda x: x not in ("TRUE", "FALSE")),
                              min_size=1, max_size=3))  # fmt: skip
        negated = draw(st.booleans())
        return f"{draw(NAMES)} {'NOT ' if negated else ''}IN ({', '.join(items)})"
    if kind == "null":
        return f"{draw(NAMES)} IS {draw(st.sampled_from(['', 'NOT ']))}NULL"
    if kind == "bare":
        return draw(NAMES)
    if kind == "not":
        return f"NOT ({draw(selector_texts(depth + 1))})"
    left, right = draw(selector_texts(depth + 1)), draw(selector_texts(depth + 1))
    return f"({left}) {kind.upper()} ({right})"


_queues = itertools.count()


def run_on_own_loop(coroutine: Coroutine[Any, Any, T]) -> T:
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as executor:
        return executor.submit(asyncio.run, coroutine).result()


async def _selected_by_postgres(
    dsn: str, maps: list[dict[str, models.PropertyValue]], selector: str
) -> tuple[list[bytes], list[bytes]]:
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=2)
    try:
        repo = repository.Repository(pool)
        writer = await repo.register_client(f"w{next(_queues)}")
        queue = await repo.create_queue(f"q{next(_queues)}")
        drafts = [models.Draft(str(n).encode(), properties=p) for n, p in enumerate(maps)]
        await repo.send_many(writer.id, [queue.id], drafts)
        taken = await repo.pop_many(writer.id, queue.id, 1000, selector=compiled(selector))
        with pytest.raises(errors.QueueEmpty):  # a peek finds no match left either
            await repo.read(writer.id, queue_id=queue.id, selector=compiled(selector))
        left = await repo.pop_many(writer.id, queue.id, 1000)
        return [m.body for m in taken], [m.body for m in left]
    finally:
        await pool.close()


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(maps=st.lists(PROPERTY_MAPS, min_size=1, max_size=8), selector=selector_texts())
def test_postgres_selects_exactly_what_the_reference_evaluator_selects(
    dsn: str, maps: list[dict[str, models.PropertyValue]], selector: str
) -> None:
    tree = selectors.parse(selector)
    expected = [str(n).encode() for n, p in enumerate(maps) if selectors.selects(tree, p)]
    taken, left = run_on_own_loop(_selected_by_postgres(dsn, maps, selector))
    assert taken == expected, (selector, maps, selectors.to_jsonpath(tree))
    assert sorted(taken + left, key=int) == [str(n).encode() for n in range(len(maps))]


def test_the_reference_evaluator_uses_three_valued_logic() -> None:
    def judge(text: str, properties: dict[str, models.PropertyValue]) -> bool | None:
        return selectors.evaluate(selectors.parse(text), properties)

    assert judge("a = 1", {}) is None
    assert judge("NOT a = 1", {}) is None
    assert judge("a = 1", {"a": "1"}) is None  # a type mismatch is unknown
    assert judge("a = 1 OR b = 2", {"b": 2}) is True
    assert judge("a = 1 AND b = 2", {"b": 3}) is False
    assert judge("a IS NULL", {}) is True
    assert judge("a = TRUE", {"a": 1}) is None  # a bool is not the integer 1
    assert judge("a = 1", {"a": True}) is None
    assert judge("a = 9007199254740993", {"a": 9007199254740993.0}) is False
    assert judge("a = 1.0", {"a": 1}) is True
    assert selectors.compare(Decimal(1), "<", "x") is None


# -- injection ----------------------------------------------------------------------

HOSTILE_LITERALS = [
    "'; DROP TABLE courier_messages; --",
    '$"@ || like_regex ".*" \\ \\u0000x',
    "') || true || ('",
    "$v1",
    "\u202e\U0001f600 ünï",
]


@pytest.mark.parametrize("text", HOSTILE_LITERALS)
async def test_hostile_text_in_a_literal_matches_only_itself(
    repo: repository.Repository, pool: asyncpg.Pool, writer: models.ClientInfo,
    reader: models.ClientInfo, queue: models.Queue, text: str,
) -> None:  # fmt: skip
    await repo.send(writer.id, [queue.id], b"decoy", options=options({"k": "other"}))
    await repo.send(writer.id, [queue.id], b"exact", options=options({"k": text}))
    quoted = "'" + text.replace("'", "''") + "'"
    taken = await repo.pop_many(reader.id, queue.id, 10, selector=compiled(f"k = {quoted}"))
    assert [m.body for m in taken] == [b"exact"]
    assert await pool.fetchval("SELECT count(*) FROM courier_messages") == 1


HOSTILE_NAMES = ['"a""b"', '"$"', '"a\\b"', '"@ || $"', '"like_regex"', '"\U0001f600"', '"x.y"']


@pytest.mark.parametrize("name", HOSTILE_NAMES)
async def test_hostile_text_in_a_quoted_name_names_only_that_property(
    repo: repository.Repository, writer: models.ClientInfo, reader: models.ClientInfo,
    queue: models.Queue, name: str,
) -> None:  # fmt: skip
    key = name[1:-1].replace('""', '"')
    await repo.send(
        writer.id, [queue.id], b"decoy", options=options({"a": 1, "b": 1, "x": 1, "y": 1})
    )
    await repo.send(writer.id, [queue.id], b"exact", options=options({key: 1}))
    taken = await repo.pop_many(reader.id, queue.id, 10, selector=compiled(f"{name} = 1"))
    assert [m.body for m in taken] == [b"exact"]


@pytest.mark.parametrize(
    "selector",
    [
        "k = ''; DROP TABLE courier_messages; --'",
        "k = 1; DROP TABLE courier_messages",
        "k = 1 || true",
        "$.k == 1",
        "k like_regex '.*'",
        "@ == 1",
        "k = 'unclosed",
        'k = "quoted name is not a literal"',
        "exists($.k)",
        "k = 1 --",
    ],
)
async def test_hostile_selectors_are_refused_before_any_database_work(
    pool: asyncpg.Pool, selector: str
) -> None:
    with pytest.raises(errors.BadSelector) as raised:
        selectors.parse(selector)
    assert raised.value.position is not None
    assert await pool.fetchval("SELECT count(*) FROM courier_messages") == 0


async def test_without_a_selector_the_new_functions_are_the_old_ones(
    repo: repository.Repository, pool: asyncpg.Pool, writer: models.ClientInfo,
    reader: models.ClientInfo, queue: models.Queue,
) -> None:  # fmt: skip
    for body in (b"1", b"2", b"3"):
        await repo.send(writer.id, [queue.id], body, options=options({"n": 1}))
    one = await pool.fetchrow(
        "SELECT status, body FROM courier_read_v4($1, $2, NULL, 'time', true, 0, NULL, NULL, NULL)",
        reader.id, queue.id,
    )  # fmt: skip
    rest = await pool.fetch(
        "SELECT body FROM courier_pop_many_v3($1, $2, NULL, 'time', 5, 0, NULL, NULL, NULL)",
        reader.id, queue.id,
    )  # fmt: skip
    assert (one["status"], one["body"]) == (0, b"1")
    assert [row["body"] for row in rest] == [b"2", b"3"]
    empty = await pool.fetchrow(
        "SELECT status FROM courier_read_v4($1, $2, NULL, 'time', true, 0, NULL, NULL, NULL)",
        reader.id, queue.id,
    )  # fmt: skip
    assert empty["status"] == 5  # QUEUE_EMPTY, as courier_read_v3 answers


async def test_a_selective_read_keeps_the_queue_s_read_list(
    repo: repository.Repository, writer: models.ClientInfo, reader: models.ClientInfo
) -> None:
    queue = await repo.create_queue("listed", creator=writer.id)
    await repo.set_queue_acl(writer.id, models.QueueAcl(queue.id, None, (writer.id,)))
    await repo.send(writer.id, [queue.id], b"x", options=options({"n": 1}))
    with pytest.raises(errors.NotAuthorised):
        await repo.read(reader.id, queue_id=queue.id, pop=True, selector=compiled("n = 1"))
    with pytest.raises(errors.NotAuthorised):
        await repo.pop_many(reader.id, queue.id, 5, selector=compiled("n = 1"))
    with pytest.raises(errors.NoMessage):  # by sender: the queue is hidden from the reader
        await repo.read(reader.id, sender_id=writer.id, pop=True, selector=compiled("n = 1"))
    taken = await repo.read(writer.id, queue_id=queue.id, pop=True, selector=compiled("n = 1"))
    assert taken.body == b"x"
