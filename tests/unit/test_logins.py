"""The lockout after failed logins, on a clock the test turns."""

from __future__ import annotations

import pytest

from courier import errors, scram
from courier.server import logins


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_name_is_locked_out_after_its_failures_for_doubling_times() -> None:
    clock = Clock()
    throttle = logins.Throttle(max_failures=3, clock=clock)
    name = logins.name_key("eve")
    for _ in range(2):
        throttle.failure(name)
        throttle.check(name)  # not yet
    throttle.failure(name)  # the third: locked for 1 s
    with pytest.raises(errors.NotAuthorised, match="too many failed logins"):
        throttle.check(name)
    clock.now += 1.01
    throttle.check(name)
    throttle.failure(name)  # the fourth: 2 s
    clock.now += 1.5
    with pytest.raises(errors.NotAuthorised):
        throttle.check(name)
    clock.now += 0.6
    throttle.check(name)
    throttle.check(logins.name_key("someone else"))


def test_a_success_clears_the_name_and_old_failures_are_forgotten() -> None:
    clock = Clock()
    throttle = logins.Throttle(max_failures=2, clock=clock)
    name = logins.name_key("eve")
    throttle.failure(name)
    throttle.success(name)
    throttle.failure(name)
    throttle.check(name)  # one failure since the success
    clock.now += logins.FORGET_AFTER + 1
    throttle.failure(name)
    throttle.check(name)  # the old one was forgotten


def test_an_address_may_fail_more_often_than_a_name() -> None:
    throttle = logins.Throttle(max_failures=2, clock=Clock())
    peer = logins.peer_key("10.0.0.7")
    for _ in range(2 * logins.PEER_FACTOR - 1):
        throttle.failure(peer)
    throttle.check(peer)
    throttle.failure(peer)
    with pytest.raises(errors.NotAuthorised):
        throttle.check(peer)


def test_an_unknown_name_gets_a_steady_decoy_challenge_that_no_proof_passes() -> None:
    guard = logins.Logins()
    first, nonce, decoy = guard.challenge("ghost", "abc", None, None)
    _, _, same = guard.challenge("ghost", "xyz", None, None)
    assert nonce.startswith("abc") and decoy.salt == same.salt
    salted = scram.salted_password("anything", decoy.salt, decoy.iterations)
    with pytest.raises(errors.NotAuthorised, match=r"^login failed$"):
        guard.check_proof(first, scram.client_proof(salted, first.auth_message))
    with pytest.raises(errors.BadRequest):
        guard.challenge("ghost", "with,comma", None, None)
