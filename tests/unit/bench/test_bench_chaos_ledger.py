"""`courier bench chaos`'s accounting: lost, duplicate acks, failovers, from hand-made reports.

Two producers send five messages: producer 0 numbers 0-2 (ledger places 0-2),
producer 1 numbers 0-1 (places 3-4).
"""

from __future__ import annotations

import datetime

import pytest

from courier import models
from courier.bench import chaos_clients, chaos_cluster, chaos_ledger

MESSAGES, PRODUCERS = 5, 2
SENT_AT = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def producer(confirmed: dict[int, int], unconfirmed: tuple[int, ...] = ()) -> chaos_clients.Ledger:
    ledger = chaos_clients.Ledger(MESSAGES)
    for place, message_id in confirmed.items():
        ledger.confirmed_id[place] = message_id
    ledger.unconfirmed.extend(unconfirmed)
    return ledger


def message(message_id: int, deliveries: int = 1, failure: str | None = None) -> models.Message:
    return models.Message(
        id=message_id, queue=1, sender=1, receiver=None, context=None, priority=5,
        created_at=SENT_AT, body=b"", deliveries=deliveries, failure=failure,
    )  # fmt: skip


def consumer(acked: dict[int, list[int]]) -> chaos_clients.Ledger:
    ledger = chaos_clients.Ledger(MESSAGES)
    for place, ids in acked.items():
        for message_id in ids:
            ledger.delivered(place, message(message_id))
            ledger.acked(place, message_id)
    return ledger


def account(*ledgers: chaos_clients.Ledger) -> chaos_ledger.Accounts:
    return chaos_ledger.account(MESSAGES, PRODUCERS, ledgers)


ALL_SENT = {0: 10, 1: 11, 2: 12, 3: 13, 4: 14}


def test_every_confirmed_message_acked_once_is_a_clean_run() -> None:
    found = account(producer(ALL_SENT), consumer({0: [10], 1: [11]}),
                    consumer({2: [12], 3: [13], 4: [14]}))  # fmt: skip
    assert (found.sends_confirmed, found.acked, found.lost, found.duplicate_acks) == (5, 5, 0, 0)
    assert found.id_mismatches == 0 and found.deliveries == 5


def test_a_confirmed_message_nobody_acked_is_lost_and_named() -> None:
    found = account(producer(ALL_SENT), consumer({0: [10], 1: [11], 2: [12], 3: [13]}))
    assert found.lost == 1
    assert found.lost_examples == ["1-1"]


def test_a_message_still_stored_is_left_not_lost() -> None:
    found = chaos_ledger.account(
        MESSAGES, PRODUCERS, [producer(ALL_SENT), consumer({0: [10], 1: [11], 2: [12]})],
        left=[(1, 0)],
    )  # fmt: skip
    assert (found.lost, found.left, found.lost_examples) == (1, 1, ["1-1"])


def test_an_ack_whose_reply_was_lost_is_not_a_loss() -> None:
    unknown = consumer({0: [10], 1: [11], 2: [12], 3: [13]})
    unknown.ack_unknown[4] = 1
    found = account(producer(ALL_SENT), unknown)
    assert (found.lost, found.acked_reply_lost, found.ack_unknown) == (0, 1, 1)


def test_an_unconfirmed_send_may_be_missing_but_not_twice() -> None:
    sent = producer({0: 10, 1: 11, 2: 12, 3: 13}, unconfirmed=(4,))
    found = account(sent, consumer({0: [10], 1: [11], 2: [12], 3: [13]}))
    assert (found.lost, found.sends_unconfirmed, found.unconfirmed_acked) == (0, 1, 0)
    twice = account(sent, consumer({0: [10], 1: [11], 2: [12], 3: [13], 4: [20, 21]}))
    assert (twice.unconfirmed_acked, twice.duplicate_acks, twice.stored_twice) == (1, 1, 1)


def test_duplicate_acks_tell_the_same_message_from_a_second_copy() -> None:
    # The same id acked in two processes; a second id for number 1-0 in one process.
    found = account(producer(ALL_SENT), consumer({0: [10], 1: [11], 2: [12], 3: [13, 99]}),
                    consumer({0: [10], 4: [14]}))  # fmt: skip
    assert found.duplicate_acks == 2
    assert (found.acked_twice, found.stored_twice) == (1, 1)


def test_redeliveries_are_counted_by_reason() -> None:
    ledger = consumer({})
    ledger.delivered(0, message(10))
    ledger.delivered(0, message(10, deliveries=2, failure="the connection closed"))
    ledger.delivered(0, message(10, deliveries=4, failure="lease expired"))
    ledger.delivered(1, message(11, deliveries=2))
    found = account(producer(ALL_SENT), ledger)
    assert found.redeliveries == {"the connection closed": 1, "lease expired": 1,
                                  "(none given)": 1}  # fmt: skip
    assert found.unexplained == 1
    assert found.unseen_deliveries == 1 + 1  # number 0's third delivery, number 1's first


def outage(client: str, server: str, started: float, ended: float) -> chaos_clients.Outage:
    return chaos_clients.Outage(client, server, started, started + 0.1, ended, "B", "x")


def test_outages_go_to_the_kill_of_their_middleware_or_the_database_restart() -> None:
    kills = [chaos_cluster.Kill("A", 1, at=10.0, restarted_s=1.0),
             chaos_cluster.Kill("B", 2, at=20.0, restarted_s=1.0)]  # fmt: skip
    restarts = [chaos_cluster.DatabaseRestart(at=30.0, stopped_s=1.0, back_s=2.0)]
    found = chaos_ledger.sort_outages(
        [outage("c1", "A", 10.01, 10.3), outage("c2", "B", 20.0, 20.5),
         outage("c3", "A", 30.1, 32.5), outage("c4", "B", 40.0, 40.1)],
        kills, restarts,
    )  # fmt: skip
    assert [[f.client for f in each] for each in found.by_kill] == [["c1"], ["c2"]]
    assert found.answered == pytest.approx([0.3, 0.5])
    assert found.failovers == pytest.approx([0.11, 0.1])
    assert found.database == pytest.approx([2.5])
    assert [o.client for o in found.other] == ["c4"]


def test_spread_is_p50_p99_and_max() -> None:
    assert chaos_ledger.spread([]) is None
    found = chaos_ledger.spread([0.1, 0.2, 0.3, 1.0])
    assert found == {"p50_s": 0.25, "p99_s": pytest.approx(0.979), "max_s": 1.0, "count": 4}
