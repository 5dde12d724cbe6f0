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
    """GET_CLIENT as a table, noting every name asked for."""

    def __init__(self, table: dict[str, int]) -> None:
        self.table = table
        self.asked: list[str] = []
        self.names = client_refs.ClientNames(self)

    async def __call__(self, name: str) -> models.ClientIdentity:
        self.asked.append(name)
        if name not in self.table:
            raise errors.ClientNotFound(client_refs.describe_missing(name))
        return models.ClientIdentity(self.table[name], name)


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


def test_a_batch_naming_receivers_asks_for_all_their_ids_then_drafts_with_them() -> None:
    batch = [
        batches.Outgoing("a", receiver="bob"), "plain", batches.Outgoing("b", receiver=7),
        batches.Outgoing("c", receiver="carol"), batches.Outgoing("d", receiver="bob"),
    ]  # fmt: skip
    defaults = batches.Defaults(receiver=2)
    with pytest.raises(batches.NamedReceivers) as named:
        batches.drafts(batch, defaults)
    assert named.value.names == {"bob": 1, "carol": 4}  # each with its first message
    with pytest.raises(batches.NamedReceivers) as still:
        batches.drafts(batch, defaults, {"bob": 4})
    assert still.value.names == {"carol": 4}
    drafts = batches.drafts(batch, defaults, {"bob": 4, "carol": 9})
    assert [d.receiver for d in drafts] == [4, 2, 7, 9, 4]


def test_a_bad_batch_is_refused_before_any_name_is_asked_for() -> None:
    named = batches.Outgoing("a", receiver="bob")
    with pytest.raises(errors.BadRequest, match="message 2 of the batch"):
        batches.drafts([named, batches.Outgoing("b", priority=99)], batches.Defaults())
    with pytest.raises(errors.BadRequest, match="at most"):
        batches.drafts([named] * (batches.MAX_BATCH + 1), batches.Defaults())
    with pytest.raises(TypeError, match="looked up before"):
        batches.drafts(["x"], batches.Defaults(receiver="bob"))  # type: ignore[arg-type]


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
