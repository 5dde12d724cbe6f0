"""Estimating the offset between the server's clock and ours from PING round trips.

Each sample is (t0, server time, t1): our wall clock when the PING left, the
server's when it answered, ours when the PONG arrived. Assuming the two legs take
equally long, the server read its clock at our (t0 + t1) / 2, so

    offset = server_time - (t0 + t1) / 2        (server clock minus client clock)

and the true offset lies within half the round trip of that. The sample with the
shortest round trip is the least disturbed by queueing, so it wins (as in NTP).

    >>> estimate([Sample(1_000, 1_600, 1_200), Sample(2_000, 2_530, 2_060)])
    (500, 30)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Sample:
    sent_ns: int
    server_ns: int
    received_ns: int

    @property
    def round_trip_ns(self) -> int:
        return self.received_ns - self.sent_ns


def estimate(samples: Sequence[Sample]) -> tuple[int, int]:
    """(offset_ns, uncertainty_ns) from the sample with the shortest round trip."""
    if not samples:
        raise ValueError("at least one sample is needed")
    best = min(samples, key=lambda sample: sample.round_trip_ns)
    midpoint = (best.sent_ns + best.received_ns) // 2
    return best.server_ns - midpoint, best.round_trip_ns // 2
