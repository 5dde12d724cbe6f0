"""Who may read and who may create and delete.

Tokens: the admin token may do everything; the viewer token, when the console has
one, may read. The JSON API takes a token in a header (``X-Courier-Admin-Token``,
or ``Authorization: Bearer <token>`` for reading); HTML forms take the admin token
as the ``admin_token`` field. Signing in trades a token for a session: the cookie
carries only the session's random id (see ``sessions``), never the token, and is
HttpOnly and SameSite=Strict, so another site can neither read it nor submit a form
with it. Besides, a form whose authority is the session (no token in it) must
carry the session's CSRF token, which only the console's own pages hold: a forged
form has the cookie at most, never that.
"""

from __future__ import annotations

import secrets

from starlette.requests import Request

from courier.console import sessions

HEADER = "X-Courier-Admin-Token"
COOKIE = "courier_session"
FORM_FIELD = "admin_token"
VIEWER_FORM_FIELD = "viewer_token"
CSRF_FORM_FIELD = "csrf_token"
TOKEN_BYTES = 24


def generate_token() -> str:
    """A fresh random token, for a console started without one."""
    return secrets.token_urlsafe(TOKEN_BYTES)


def token_matches(offered: str | None, expected: str | None) -> bool:
    """Constant-time comparison; an empty or missing offer never matches."""
    if not offered or not expected:
        return False
    return secrets.compare_digest(offered.encode(), expected.encode())


def bearer_token(request: Request) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, if any."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else None


def session_role(request: Request, store: sessions.SessionStore) -> sessions.Role | None:
    return store.role_of(request.cookies.get(COOKIE))


def api_is_admin(request: Request, expected: str) -> bool:
    return token_matches(request.headers.get(HEADER), expected)


def cookie_is_admin(request: Request, store: sessions.SessionStore) -> bool:
    return session_role(request, store) is sessions.Role.ADMIN


def form_is_admin(
    request: Request, form_token: str | None, expected: str, store: sessions.SessionStore
) -> bool:
    """A form may carry the token itself or rely on the signed-in session (whose
    CSRF token ``csrf_matches`` checks)."""
    return token_matches(form_token, expected) or cookie_is_admin(request, store)


def csrf_matches(request: Request, offered: str | None, store: sessions.SessionStore) -> bool:
    """Whether a form relying on the browser's session carries that session's CSRF
    token (constant-time); False without a live session."""
    return token_matches(offered, store.csrf_of(request.cookies.get(COOKIE)))


def csrf_token(request: Request, store: sessions.SessionStore) -> str | None:
    """The token the pages put in their forms; None without a session."""
    return store.csrf_of(request.cookies.get(COOKIE))


def may_read(
    request: Request, admin_token: str, viewer_token: str | None, store: sessions.SessionStore
) -> bool:
    """Without a viewer token anyone who reaches the console reads (the Host check
    guards that); with one, a session or either token in a header is needed."""
    if viewer_token is None or session_role(request, store) is not None:
        return True
    bearer = bearer_token(request)
    return (
        token_matches(bearer, viewer_token)
        or token_matches(bearer, admin_token)
        or api_is_admin(request, admin_token)
    )
