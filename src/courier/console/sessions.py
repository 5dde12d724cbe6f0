"""Signed-in browsers: a random session id in the cookie, its role kept here.

The cookie never carries a token, only an id this console process made; the id
means something only while this process holds it, so signing out (or restarting
the console) ends it for good. Each session also has a CSRF token: the pages put
it in every form, and a form that relies on the session must carry it back.

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
from dataclasses import dataclass

SESSION_ID_BYTES = 32
DEFAULT_TTL_S = 12 * 3600.0


class Role(enum.Enum):
    """What a session may do: a viewer reads, an admin also creates and deletes."""

    VIEWER = "viewer"
    ADMIN = "admin"


@dataclass(frozen=True, slots=True)
class Live:
    role: Role
    expires_at: float
    csrf: str


class SessionStore:
    """Live sessions of one console process, each with an expiry."""

    def __init__(
        self, ttl_s: float = DEFAULT_TTL_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ttl_s = ttl_s
        self.clock = clock
        self.sessions: dict[str, Live] = {}

    def create(self, role: Role) -> str:
        self.prune()
        session_id = secrets.token_urlsafe(SESSION_ID_BYTES)
        csrf = secrets.token_urlsafe(SESSION_ID_BYTES)
        self.sessions[session_id] = Live(role, self.clock() + self.ttl_s, csrf)
        return session_id

    def role_of(self, session_id: str | None) -> Role | None:
        """The live session's role; None when unknown or expired."""
        found = self.live(session_id)
        return found.role if found is not None else None

    def csrf_of(self, session_id: str | None) -> str | None:
        """The live session's CSRF token; None when unknown or expired."""
        found = self.live(session_id)
        return found.csrf if found is not None else None

    def live(self, session_id: str | None) -> Live | None:
        found = self.sessions.get(session_id) if session_id else None
        if found is None:
            return None
        if self.clock() >= found.expires_at:
            self.end(session_id)
            return None
        return found

    def end(self, session_id: str | None) -> None:
        if session_id:
            self.sessions.pop(session_id, None)

    def prune(self) -> None:
        """Forget expired sessions, so abandoned ones do not pile up."""
        now = self.clock()
        expired = [key for key, live in self.sessions.items() if now >= live.expires_at]
        for session_id in expired:
            del self.sessions[session_id]
