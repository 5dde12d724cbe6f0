"""Who may hold a connection: logged-in clients, and a few that have not logged in.

A connection starts *anonymous*. At most ``max_anonymous`` anonymous connections are
kept; a newcomer beyond that makes room by pushing out the oldest, so idle sockets
that never log in can never lock out a client that is about to (it logs in within
milliseconds of connecting). A login with a secret takes longer (the client
derives its key between LOGIN_START and LOGIN_PROOF, and a burst of clients queues
for that), so LOGIN_START moves the connection out of the anonymous ones into those
*proving* a secret, whom newcomers do not push out; at most ``max_clients`` of
them are kept, the oldest making room, and the login timeout still closes any that
stall. A LOGIN takes one of ``max_clients`` places, or is answered SERVER_FULL; a
LOGOUT gives it back, and the connection is anonymous again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from courier import errors

C = TypeVar("C")


class Pushable(Protocol):
    def push_out(self) -> None: ...


P = TypeVar("P", bound=Pushable)


class Admission(Generic[C]):
    def __init__(self, max_clients: int, max_anonymous: int) -> None:
        self.max_clients = max_clients
        self.max_anonymous = max_anonymous
        self._anonymous: dict[C, None] = {}  # oldest first
        self._proving: dict[C, None] = {}  # oldest first
        self._logged_in: set[C] = set()

    @property
    def anonymous(self) -> int:
        return len(self._anonymous)

    @property
    def logged_in(self) -> int:
        return len(self._logged_in)

    def arrive(self, connection: C) -> C | None:
        """Admit a new connection, anonymous; the oldest anonymous one it pushed out."""
        self._anonymous[connection] = None
        if len(self._anonymous) <= self.max_anonymous:
            return None
        oldest = next(iter(self._anonymous))
        del self._anonymous[oldest]
        return oldest

    def start_login(self, connection: C) -> C | None:
        """The connection began a login with a secret: newcomers no longer push it out.
        Returns the oldest connection still proving that it pushed out, if any."""
        if connection in self._anonymous:
            del self._anonymous[connection]
            self._proving[connection] = None
        if len(self._proving) <= self.max_clients:
            return None
        oldest = next(iter(self._proving))
        del self._proving[oldest]
        return oldest

    def log_in(self, connection: C) -> None:
        """Take a client's place for the connection; ServerFull when none is free."""
        if connection in self._logged_in:
            return
        if len(self._logged_in) >= self.max_clients:
            raise errors.ServerFull(
                f"this server holds its maximum of {self.max_clients} logged-in clients"
            )
        self._anonymous.pop(connection, None)
        self._proving.pop(connection, None)
        self._logged_in.add(connection)

    def log_out(self, connection: C) -> None:
        """The connection's login failed or ended: it is anonymous again, the newest."""
        if connection in self._logged_in or connection in self._proving:
            self._logged_in.discard(connection)
            self._proving.pop(connection, None)
            self._anonymous[connection] = None

    def leave(self, connection: C) -> None:
        self._anonymous.pop(connection, None)
        self._proving.pop(connection, None)
        self._logged_in.discard(connection)

    def is_anonymous(self, connection: C) -> bool:
        return connection in self._anonymous


@dataclass(frozen=True, slots=True)
class Seat(Generic[P]):
    """One connection's hold on the places, as the LOGIN and LOGOUT handlers move it."""

    places: Admission[P]
    connection: P

    def start_login(self) -> None:
        pushed_out = self.places.start_login(self.connection)
        if pushed_out is not None:
            pushed_out.push_out()

    def log_in(self) -> None:
        self.places.log_in(self.connection)

    def log_out(self) -> None:
        self.places.log_out(self.connection)
