"""Signed-in browsers: a random session id in the cookie, its role kept here.

The cookie never carries a token, only an id this console process made; the id
means something only while this process holds it, so signing out (or restarting
the console) ends it for good.

    >>> store = SessionStore(ttl_s=60.0)
    >>> session_id = store.create(Role.ADMIN)
    >>> store.role_of(session_id)
    <Role.ADMIN: 'admin'>
    >>> store.end(session_id); store.role_of(session_id) is None
    True
"""

from __future__ import annotations

import enum
import secrets
import time
from collections.abc import Callable

SESSION_ID_BYTES = 32
DEFAULT_TTL_S = 12 * 3600.0


class Role(enum.Enum):
    """What a session may do: a viewer reads, an admin also creates and deletes."""

    VIEWER = "viewer"
    ADMIN = "admin"


class SessionStore:
    """Live sessions of one console process, each with an expiry."""

    def __init__(
        self, ttl_s: float = DEFAULT_TTL_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ttl_s = ttl_s
        self.clock = clock
        self.sessions: dict[str, tuple[Role, float]] = {}

    def create(self, role: Role) -> str:
        self.prune()
        session_id = secrets.token_urlsafe(SESSION_ID_BYTES)
        self.sessions[session_id] = (role, self.clock() + self.ttl_s)
        return session_id

    def role_of(self, session_id: str | None) -> Role | None:
        """The live session's role; None when unknown or expired."""
        found = self.sessions.get(session_id) if session_id else None
        if found is None:
            return None
        role, expires_at = found
        if self.clock() >= expires_at:
            self.end(session_id)
            return None
        return role

    def end(self, session_id: str | None) -> None:
        if session_id:
            self.sessions.pop(session_id, None)

    def prune(self) -> None:
        """Forget expired sessions, so abandoned ones do not pile up."""
        now = self.clock()
        for session_id in [key for key, (_, expiry) in self.sessions.items() if now >= expiry]:
            del self.sessions[session_id]
