"""What `courier bench chaos` checks, from the client processes' reports and the kills.

``account`` adds up every process's ``Ledger``: per message number, whether its
send was confirmed (and the id it got), how often it was acked successfully (and
with which ids), delivered, and redelivered for which reason. From that:

- **lost**: confirmed, never acked, no ack of unknown fate either, and not stored
  any more (must be 0); a message still stored at the end is *left*, not lost;
- **duplicate acks**: successful acks beyond the first of a number (must be 0),
  split into the same message acked twice and a second copy stored (a dedup id
  that did not hold);
- **acked, reply lost**: confirmed and gone, its only ack lost on the way back
  (the ack committed, or the lease was released and nobody ever took it again,
  which the database's emptiness at the end rules out).

``failovers`` matches each client's outages to the kill of the middleware it was
using: a failover lasts from the kill until the client's next answered call.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy

from courier.bench import chaos_clients, chaos_cluster

MATCH_S = 2.0
"""An outage starting this long after a kill of its middleware is that kill's doing."""
CLOCK_SLACK_S = 0.05
EXAMPLES = 10
EXPLAINED = (
    "lease expired",
    "the connection closed",
    "the middleware holding the lease stopped",
    "the session ended",
    "the receiver gave up",
)
"""The reasons the server gives a message it releases (``Message.failure``)."""


@dataclass(frozen=True, slots=True)
class Accounts:
    messages: int
    sends_confirmed: int
    sends_unconfirmed: int
    unconfirmed_acked: int
    acked: int  # message numbers acknowledged successfully at least once
    acked_reply_lost: int
    lost: int
    left: int  # message numbers still stored at the end
    lost_examples: list[str]
    duplicate_acks: int
    acked_twice: int
    stored_twice: int
    id_mismatches: int  # the acked id is not the one the send was confirmed with
    deliveries: int
    redeliveries: dict[str, int]
    unseen_deliveries: int  # leases granted whose reply never reached a consumer
    lease_expired_acks: int
    ack_unknown: int
    retried_sends: int
    errors: dict[str, int]
    last_error: str

    @property
    def redelivered(self) -> int:
        return sum(self.redeliveries.values())

    @property
    def unexplained(self) -> int:
        return sum(n for reason, n in self.redeliveries.items() if reason not in EXPLAINED)

    def as_json(self) -> dict[str, Any]:
        return {
            "messages": self.messages, "confirmed": self.sends_confirmed,
            "unconfirmed": self.sends_unconfirmed, "unconfirmed_acked": self.unconfirmed_acked,
            "acked": self.acked, "acked_reply_lost": self.acked_reply_lost, "lost": self.lost,
            "left": self.left,
            "lost_examples": self.lost_examples, "duplicate_acks": self.duplicate_acks,
            "acked_twice": self.acked_twice, "stored_twice": self.stored_twice,
            "id_mismatches": self.id_mismatches, "deliveries": self.deliveries,
            "redeliveries": self.redelivered, "redelivery_reasons": self.redeliveries,
            "unexplained_redeliveries": self.unexplained,
            "unseen_deliveries": self.unseen_deliveries,
            "lease_expired_acks": self.lease_expired_acks, "ack_unknown": self.ack_unknown,
            "retried_sends": self.retried_sends, "errors": self.errors,
            "last_error": self.last_error,
        }  # fmt: skip


def account(
    messages: int,
    producers: int,
    ledgers: Sequence[chaos_clients.Ledger],
    left: Sequence[tuple[int, int]] = (),
) -> Accounts:
    """Every message's fate; ``left`` are the (producer, number) still stored."""
    confirmed_id = numpy.sum([ledger.confirmed_id for ledger in ledgers], axis=0)
    acks = numpy.sum([ledger.acks.astype(numpy.int64) for ledger in ledgers], axis=0)
    seen = numpy.sum([ledger.seen.astype(numpy.int64) for ledger in ledgers], axis=0)
    most = numpy.max([ledger.most_deliveries for ledger in ledgers], axis=0).astype(numpy.int64)
    unknown = numpy.zeros(messages, dtype=bool)
    for ledger in ledgers:
        unknown[list(ledger.ack_unknown)] = True
    unconfirmed = numpy.zeros(messages, dtype=bool)
    for ledger in ledgers:
        unconfirmed[ledger.unconfirmed] = True
    stored = numpy.zeros(messages, dtype=bool)
    starts = chaos_clients.offsets(messages, producers)
    stored[[starts[producer] + n for producer, n in left]] = True
    confirmed = confirmed_id != 0
    lost = confirmed & (acks == 0) & ~unknown & ~stored
    twice, stored_twice = _repeated(acks, ledgers)
    acked_id = _first_acked_ids(ledgers)
    errors: collections.Counter[str] = collections.Counter()
    redeliveries: collections.Counter[str] = collections.Counter()
    for ledger in ledgers:
        errors.update(ledger.errors)
        redeliveries.update(ledger.redeliveries)
    last_errors = [ledger.last_error for ledger in ledgers if ledger.last_error]
    return Accounts(
        messages=messages, sends_confirmed=int(confirmed.sum()),
        sends_unconfirmed=int(unconfirmed.sum()),
        unconfirmed_acked=int((unconfirmed & (acks > 0)).sum()), acked=int((acks > 0).sum()),
        acked_reply_lost=int((confirmed & (acks == 0) & unknown).sum()), lost=int(lost.sum()),
        left=int(stored.sum()),
        lost_examples=[_name(int(i), messages, producers)
                       for i in numpy.flatnonzero(lost)[:EXAMPLES]],
        duplicate_acks=int(numpy.maximum(acks - 1, 0).sum()), acked_twice=twice,
        stored_twice=stored_twice,
        id_mismatches=int((confirmed & (acked_id != 0) & (acked_id != confirmed_id)).sum()),
        deliveries=int(seen.sum()),
        redeliveries={(k or "(none given)"): v for k, v in redeliveries.items()},
        unseen_deliveries=int(numpy.maximum(most - seen, 0).sum()),
        lease_expired_acks=sum(ledger.lease_expired_acks for ledger in ledgers),
        ack_unknown=int(unknown.sum()), retried_sends=sum(each.retried_sends for each in ledgers),
        errors=dict(errors), last_error=last_errors[-1] if last_errors else "",
    )  # fmt: skip


def _first_acked_ids(ledgers: Sequence[chaos_clients.Ledger]) -> Any:
    acked_id = numpy.zeros_like(ledgers[0].acked_id)
    for ledger in ledgers:
        acked_id = numpy.where(acked_id == 0, ledger.acked_id, acked_id)
    return acked_id


def _repeated(acks: Any, ledgers: Sequence[chaos_clients.Ledger]) -> tuple[int, int]:
    """Numbers acked more than once: (same message id every time, several ids)."""
    ids: dict[int, list[int]] = collections.defaultdict(list)
    for found_at in numpy.flatnonzero(acks > 1):
        index = int(found_at)
        for ledger in ledgers:
            if ledger.acked_id[index]:
                ids[index].append(int(ledger.acked_id[index]))
    for ledger in ledgers:
        for index, first, again in ledger.repeated_acks:
            ids[index] += [first, again]
    twice = sum(1 for found in ids.values() if len(set(found)) == 1)
    return twice, len(ids) - twice


def _name(index: int, messages: int, producers: int) -> str:
    starts = chaos_clients.offsets(messages, producers)
    producer = max(p for p, start in enumerate(starts) if start <= index)
    return f"{producer}-{index - starts[producer]}"


# -- failover ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Failover:
    client: str
    server: str  # killed
    to: str | None  # where the client carried on
    login_s: float  # from the kill until the client was logged in again
    answered_s: float  # from the kill until the client's next answered call


@dataclass(frozen=True, slots=True)
class Outages:
    """The clients' outages, by cause."""

    by_kill: list[list[Failover]]  # one list per kill, in order
    database: list[float] = field(default_factory=list)  # s from the restart's start
    other: list[chaos_clients.Outage] = field(default_factory=list)

    @property
    def failovers(self) -> list[float]:
        """Seconds from each kill until each of its clients was logged in again."""
        return [failover.login_s for kill in self.by_kill for failover in kill]

    @property
    def answered(self) -> list[float]:
        """Seconds from each kill until each of its clients had a call answered."""
        return [failover.answered_s for kill in self.by_kill for failover in kill]


def sort_outages(
    outages: Sequence[chaos_clients.Outage],
    kills: Sequence[chaos_cluster.Kill],
    restarts: Sequence[chaos_cluster.DatabaseRestart],
) -> Outages:
    by_kill: list[list[Failover]] = [[] for _ in kills]
    found = Outages(by_kill)
    for outage in outages:
        kill = _kill_of(outage, kills)
        if kill is not None:
            at = kills[kill].at
            by_kill[kill].append(Failover(outage.client, kills[kill].server, outage.server,
                                          outage.connected - at, outage.ended - at))  # fmt: skip
            continue
        restart = next((r for r in restarts if _during(outage, r)), None)
        if restart is not None:
            found.database.append(outage.ended - restart.at)
        else:
            found.other.append(outage)
    return found


def _kill_of(outage: chaos_clients.Outage, kills: Sequence[chaos_cluster.Kill]) -> int | None:
    candidates = [
        index for index, kill in enumerate(kills)
        if kill.server == outage.lost_server
        and kill.at - CLOCK_SLACK_S <= outage.started <= kill.at + MATCH_S
    ]  # fmt: skip
    return candidates[-1] if candidates else None


def _during(outage: chaos_clients.Outage, restart: chaos_cluster.DatabaseRestart) -> bool:
    return restart.at - CLOCK_SLACK_S <= outage.started <= restart.at + restart.back_s + MATCH_S


def spread(seconds: Sequence[float]) -> dict[str, float] | None:
    """p50, p99 and max (linear interpolation, as the other benchmarks' percentiles)."""
    if not seconds:
        return None
    p50, p99 = numpy.percentile(numpy.array(seconds), (50, 99))
    return {"p50_s": round(float(p50), 4), "p99_s": round(float(p99), 4),
            "max_s": round(max(seconds), 4), "count": len(seconds)}  # fmt: skip
