"""Client refs: names are looked up once and cached for good; ids need no lookup. And
GET_CLIENT's handler refuses a request naming both or neither before any work. Unit
tests beside the client's and the server's integration tests, which run the same
paths against real servers."""

from __future__ import annotations

from typing import cast

import pytest

from courier import errors, models
from courier.client import batches, client_refs
from courier.protocol import frames
from courier.server import handlers


class Lookups:
    """GET_CLIENT as a table, noting every name asked for; like the client's, it
    remembers what it found."""

    def __init__(self, table: dict[str, int]) -> None:
        self.table = table
        self.asked: list[str] = []
        self.names = client_refs.ClientNames(self)

    async def __call__(self, name: str) -> models.ClientIdentity:
        self.asked.append(name)
        if name not in self.table:
            raise errors.ClientNotFound(client_refs.describe_missing(name))
        found = models.ClientIdentity(self.table[name], name)
        self.names.remember(found)
        return found


async def test_a_name_is_looked_up_once_then_served_from_the_cache() -> None:
    lookups = Lookups({"bob": 4, "carol": 9})
    assert await lookups.names.id("bob") == 4
    assert await lookups.names.id("carol") == 9
    assert await lookups.names.id("bob") == 4
    assert lookups.asked == ["bob", "carol"]


async def test_an_unknown_name_is_asked_again_next_time() -> None:
    """Only what was found is kept: a client registered later is found then."""
    lookups = Lookups({})
    with pytest.raises(errors.ClientNotFound, match="no client named 'dave'"):
        await lookups.names.id("dave")
    lookups.table["dave"] = 12
    assert await lookups.names.id("dave") == 12
    assert lookups.asked == ["dave", "dave"]


def test_ids_pass_as_they_are_and_names_wait_for_their_lookup() -> None:
    assert client_refs.given_id(7) == 7
    assert client_refs.given_id(None) is None
    assert client_refs.given_id("bob") is None
    assert client_refs.describe_missing(7) == "no client with id 7"


async def test_a_batch_has_its_receiver_names_looked_up_once_each() -> None:
    lookups = Lookups({"bob": 4, "carol": 9})
    batch = [
        batches.Outgoing("a", receiver="bob"), "plain", batches.Outgoing("b", receiver=7),
        batches.Outgoing("c", receiver="carol"), batches.Outgoing("d", receiver="bob"),
    ]  # fmt: skip
    named = await batches.with_receiver_ids(batch, lookups.names.id)
    assert [m if isinstance(m, str) else m.receiver for m in named] == [4, "plain", 7, 9, 4]
    assert sorted(lookups.asked) == ["bob", "carol"]
    drafts = batches.drafts(named, batches.Defaults(receiver=2))
    assert [d.receiver for d in drafts] == [4, 2, 7, 9, 4]


async def test_a_batch_without_names_comes_back_as_it_is() -> None:
    lookups = Lookups({})
    batch = ["plain", batches.Outgoing("b", receiver=7), batches.Outgoing("c")]
    assert await batches.with_receiver_ids(batch, lookups.names.id) == tuple(batch)
    assert lookups.asked == []
    with pytest.raises(TypeError, match="looked up first"):
        batches.drafts([batches.Outgoing("x", receiver="bob")], batches.Defaults())


@pytest.mark.parametrize(
    ("request_", "problem"),
    [
        (frames.GetClient(client_id=None, name=None), "by id or by name"),
        (frames.GetClient(client_id=3, name="bob"), "not both"),
    ],
)
async def test_get_client_refuses_both_or_neither_before_any_work(
    request_: frames.GetClient, problem: str
) -> None:
    # The wire cannot carry either (one lookup code); a request built in-process can.
    # No context is needed: the handler refuses before it touches one.
    nothing = cast(handlers.Context, None)
    with pytest.raises(errors.BadRequest, match=problem):
        await handlers.get_client(nothing, request_)
