"""The mock backend stands in for the repository: same methods, fixed valid answers."""

from __future__ import annotations

import inspect

import pytest

from courier import models
from courier.db import batching, mock, repository, routing
from courier.server import backend


def public_methods(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(cls, inspect.iscoroutinefunction)
        if not name.startswith("_") and name not in {"connect", "close"}
    }


@pytest.mark.parametrize(
    "storage", [repository.Repository, batching.BatchedRepository, mock.MockBackend]
)
def test_every_storage_has_every_boundary_method_with_the_same_parameters(
    storage: type,
) -> None:
    # The boundary's method set is said once, by the protocols the server calls.
    wanted = {**public_methods(backend.Backend), **public_methods(backend.InstanceStore)}
    offered = public_methods(storage)
    assert set(wanted) <= set(offered)
    for name, signature in wanted.items():
        assert list(offered[name].parameters) == list(signature.parameters), name


@pytest.mark.parametrize(
    ("storage", "boundary"),
    [(routing.RoutedBackend, backend.Backend), (routing.RoutedInstances, backend.InstanceStore)],
)
def test_the_routed_storage_of_a_cluster_keeps_the_boundary(storage: type, boundary: type) -> None:
    wanted, offered = public_methods(boundary), public_methods(storage)
    assert set(wanted) <= set(offered)
    for name, signature in wanted.items():
        assert list(offered[name].parameters) == list(signature.parameters), name


async def test_every_client_gets_its_own_stable_id_in_every_process() -> None:
    backend = mock.MockBackend()
    alice = await backend.register_client("alice")
    bob = await backend.register_client("bob")
    assert alice.id != bob.id
    assert (await backend.login("alice", instance_id=1)).id == alice.id
    assert (await backend.login(alice.id, instance_id=1)).id == alice.id
    assert alice.id == mock.stable_id("alice") > 0


async def test_reads_always_find_a_valid_message() -> None:
    backend = mock.MockBackend()
    popped = await backend.read(7, queue_id=3, pop=True)
    assert isinstance(popped, models.Message)
    assert popped.queue == 3
    assert models.MIN_PRIORITY <= popped.priority <= models.MAX_PRIORITY
    by_sender = await backend.read(7, sender_id=9)
    assert by_sender.sender == 9
    response = await backend.pop_response(7, 3, context=42)
    assert (response.receiver, response.context) == (7, 42)


async def test_sends_return_one_id_per_queue() -> None:
    backend = mock.MockBackend()
    ids = await backend.send(1, [4, 5, 6], "body")
    assert len(ids) == 3 and len(set(ids)) == 3
