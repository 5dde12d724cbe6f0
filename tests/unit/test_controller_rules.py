"""The controller's rules on members made up for the purpose: load, provisioning, moves;
and the paced node that stands in for a node's capacity in the lab."""

from __future__ import annotations

import asyncio
import time

from courier import controller, models
from courier.db import routing

RULES = controller.Rules(capacity=4, high=1.0, low=0.5, move_above=10, move_at_most=100)


def member(
    n: int, producers: int, consumers: int, length: int = 0, capacity: int = 4
) -> controller.Member:
    return controller.Member(
        models.Replica(n, 100 + n, f"q#{n}", n, producers, consumers, length), capacity
    )


def test_the_load_is_clients_over_the_sum_of_capacities() -> None:
    found = controller.load_of([member(1, 2, 3, length=7), member(2, 1, 0, length=5, capacity=6)])
    assert (found.clients, found.capacity, found.length) == (6, 10, 12)
    assert found.value == 0.6


def test_a_member_is_added_above_the_high_mark_when_a_node_is_free() -> None:
    crowded = [member(1, 2, 3)]  # 5 clients on a capacity of 4: 1.25
    assert controller.provision(crowded, RULES, free_node=2) == ("add", 2)
    assert controller.provision(crowded, RULES, free_node=None) is None
    at_capacity = [member(1, 2, 2)]  # exactly 1.0 is not above it
    assert controller.provision(at_capacity, RULES, free_node=2) is None


def test_the_member_with_fewest_clients_goes_when_the_rest_would_stay_below_low() -> None:
    # 3 clients; without a member the capacity is 4: 0.75 is not below 0.5.
    assert controller.provision([member(1, 1, 1), member(2, 1, 0)], RULES, None) is None
    # 1 client: 1 / 4 = 0.25 < 0.5, and member 2 has none (the later one goes on a tie).
    assert controller.provision([member(1, 1, 0), member(2, 0, 0)], RULES, None) == ("remove", 2)
    assert controller.provision([member(1, 0, 0), member(2, 0, 0)], RULES, None) == ("remove", 2)
    assert controller.provision([member(1, 0, 0)], RULES, None) is None  # never the last one
    # A queue created with two members keeps them, however idle.
    assert controller.provision([member(1, 0, 0), member(2, 0, 0)], RULES, None, 2) is None
    three = [member(1, 0, 0), member(2, 0, 0), member(3, 0, 0)]
    assert controller.provision(three, RULES, None, 2) == ("remove", 3)


def test_half_the_gap_moves_from_the_longest_to_the_shortest() -> None:
    members = [member(1, 0, 0, length=50), member(2, 0, 0, length=8), member(3, 0, 0, length=20)]
    source, target, count = controller.rebalance(members, RULES)  # type: ignore[misc]
    assert (source.replica.member, target.replica.member, count) == (1, 2, 21)
    close = [member(1, 0, 0, length=18), member(2, 0, 0, length=8)]  # a gap of 10 is not above 10
    assert controller.rebalance(close, RULES) is None
    huge = [member(1, 0, 0, length=1000), member(2, 0, 0, length=0)]
    assert controller.rebalance(huge, RULES)[2] == 100  # type: ignore[index]


def test_messages_go_where_consumers_are_and_an_empty_member_with_consumers_pulls() -> None:
    # Member 2 is shorter but has no consumers: member 3's consumers get the messages.
    members = [member(1, 2, 0, length=40), member(2, 0, 0, length=0), member(3, 0, 2, length=10)]
    source, target, count = controller.rebalance(members, RULES)  # type: ignore[misc]
    assert (source.replica.member, target.replica.member, count) == (1, 3, 15)
    # A gap of 3 is below move_above, but member 2's consumers wait on nothing.
    pulling = [member(1, 1, 0, length=3), member(2, 0, 2, length=0)]
    assert controller.rebalance(pulling, RULES)[1:] == (pulling[1], 2)  # type: ignore[index]
    idle = [member(1, 1, 0, length=3), member(2, 0, 0, length=0)]  # nobody waits
    assert controller.rebalance(idle, RULES) is None


async def test_a_paced_node_serves_one_request_at_a_time_for_its_service_time() -> None:
    class Node:
        pool = "kept"

        async def send(self, n: int) -> int:
            return n

    paced = routing.Paced(Node(), service_s=0.02)
    began = time.perf_counter()
    assert await asyncio.gather(*(paced.send(n) for n in range(5))) == [0, 1, 2, 3, 4]
    assert time.perf_counter() - began >= 5 * 0.02  # one service time after another
    assert paced.pool == "kept"  # plain attributes pass through
