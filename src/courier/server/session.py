"""Session state: which client, if any, a connection is logged in as.

A connection is one session. The sender of every message is the logged-in client,
so handlers take identity from here and never from a request body. A session is
immutable: LOGIN and LOGOUT replace the connection's session, and each request keeps
the one that was current when it arrived.
"""

from __future__ import annotations

from dataclasses import dataclass

from courier import errors, models
from courier.server import logins


@dataclass(frozen=True, slots=True)
class Session:
    client: models.ClientInfo | None = None
    challenge: logins.Challenge | None = None
    """A login between LOGIN_START and LOGIN_PROOF (the next LOGIN_PROOF consumes it)."""

    @property
    def client_id(self) -> int:
        """The logged-in client's id, or 0 before login (as measurement records say)."""
        return self.client.id if self.client is not None else 0

    def require_client(self) -> models.ClientInfo:
        if self.client is None:
            raise errors.NotLoggedIn()
        return self.client

    def require_writer(self) -> models.ClientInfo:
        """The logged-in client, if it may send."""
        client = self.require_client()
        if client.mode is models.ClientMode.READ_ONLY:
            raise errors.NotAuthorised(f"client {client.name!r} is read-only and cannot send")
        return client

    def require_admin(self, action: str) -> models.ClientInfo:
        """The logged-in client, if it is an admin."""
        client = self.require_client()
        if client.mode is not models.ClientMode.ADMIN:
            raise errors.NotAuthorised(f"only an admin may {action}")
        return client
