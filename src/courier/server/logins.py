"""Logins with a secret: the SCRAM challenge, the proof check, and the lockout after
repeated failures.

Every failure a caller could learn something from answers the same NOT_AUTHORISED
"login failed": an unknown name, a disabled client, a client without a secret and a
wrong proof all look alike. An unknown name even gets a challenge, with a salt
derived from the name and a key of this process, so it looks like any other.

Failures are counted per client name (as given) and per peer address, on this
middleware only. After ``max_failures`` for a name (``PEER_FACTOR`` times as many from
an address, which many honest clients may share), further logins for that name or
from that address are refused for one second, doubling with each further failure up
to ``MAX_LOCKOUT``; a success clears the name's count (not the address's, so one
valid account does not reset the guessing of another).
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from courier import errors, models, scram

FIRST_LOCKOUT = 1.0
MAX_LOCKOUT = 300.0
FORGET_AFTER = 900.0
"""Seconds after its last failure that a name or address starts afresh."""
PEER_FACTOR = 4
"""An address may fail this many times as often as a name before its lockout."""
MAX_TRACKED = 100_000
"""Failure records kept at most; the oldest go first (bounded memory)."""

FAILED = "login failed"


def failed() -> errors.NotAuthorised:
    """The one error of every failed login."""
    return errors.NotAuthorised(FAILED)


@dataclass(frozen=True, slots=True)
class Challenge:
    """A login between its two steps: who, and what the proof must cover."""

    client_id: int | None
    """None: no such client (or disabled, or without a secret): the proof fails."""
    user: str
    auth_message: bytes
    stored_key: bytes
    server_key: bytes


@dataclass(slots=True)
class _Failures:
    count: int = 0
    last: float = 0.0
    blocked_until: float = 0.0


@dataclass(slots=True)
class Throttle:
    """Counts failed logins by key ("name:alice", "peer:10.0.0.7") and refuses a
    locked-out key until its lockout ends."""

    max_failures: int = 5
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)
    _failures: dict[str, _Failures] = field(default_factory=dict)

    def check(self, *keys: str) -> None:
        """NotAuthorised while any key is locked out."""
        now = self._now()
        wait = max((self._failures[k].blocked_until - now for k in keys if k in self._failures),
                   default=0.0)  # fmt: skip
        if wait > 0:
            raise errors.NotAuthorised(
                f"{FAILED}: too many failed logins; try again in {wait:.0f}s or later"
            )

    def failure(self, *keys: str) -> None:
        now = self._now()
        for key in keys:
            record = self._failures.pop(key, None) or _Failures()
            if now - record.last > FORGET_AFTER:
                record = _Failures()
            record.count += 1
            record.last = now
            limit = self.max_failures * (PEER_FACTOR if key.startswith("peer:") else 1)
            over = record.count - limit
            if over >= 0:
                record.blocked_until = now + min(FIRST_LOCKOUT * 2**over, MAX_LOCKOUT)
            self._failures[key] = record  # re-inserted: dict order is age order
        while len(self._failures) > MAX_TRACKED:
            del self._failures[next(iter(self._failures))]

    def success(self, key: str) -> None:
        self._failures.pop(key, None)

    def _now(self) -> float:
        return self.clock()


def name_key(user: str) -> str:
    return f"name:{user}"


def peer_key(host: str) -> str:
    return f"peer:{host}"


class Logins:
    """One per server: the throttle and this process's key for decoy challenges."""

    def __init__(self, max_failures: int = 5, *, open_login: bool = False) -> None:
        self.throttle = Throttle(max_failures)
        self.open_login = open_login
        self._decoy_key = secrets.token_bytes(32)

    def challenge(
        self,
        request_user: str,
        client_nonce: str,
        verifier: models.Verifier | None,
        client_id: int | None,
    ) -> tuple[Challenge, str, models.Verifier]:
        """The challenge to keep and the nonce and verifier to answer with; a decoy
        verifier when there is none."""
        if not client_nonce or "," in client_nonce:
            raise errors.BadRequest("a client nonce is printable text without commas")
        if verifier is None:
            client_id, verifier = None, self._decoy(request_user)
        nonce = client_nonce + scram.new_nonce()
        message = scram.auth_message(
            request_user, client_nonce, nonce, verifier.salt, verifier.iterations
        )
        held = Challenge(client_id, request_user, message, verifier.stored_key, verifier.server_key)
        return held, nonce, verifier

    def check_proof(self, challenge: Challenge, proof: bytes) -> int:
        """The client id the proof logs in; NotAuthorised when it does not."""
        if challenge.client_id is None or not scram.verify_proof(
            challenge.stored_key, challenge.auth_message, proof
        ):
            raise failed()
        return challenge.client_id

    def _decoy(self, user: str) -> models.Verifier:
        """A verifier nobody can pass, the same for a name every time in this process."""
        salt = hmac.digest(self._decoy_key, user.encode(), "sha256")[: scram.SALT_BYTES]
        return models.Verifier(salt, scram.DEFAULT_ITERATIONS, secrets.token_bytes(32), b"\0" * 32)
