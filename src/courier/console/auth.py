"""The admin token: who may create and delete.

The JSON API takes the token in the ``X-Courier-Admin-Token`` header; HTML forms take
it as the ``admin_token`` field or from the cookie that signing in sets. The cookie
is HttpOnly and SameSite=Strict, so another site cannot submit a form with it.
"""

from __future__ import annotations

import hmac
import secrets

from starlette.requests import Request

HEADER = "X-Courier-Admin-Token"
COOKIE = "courier_admin_token"
FORM_FIELD = "admin_token"
TOKEN_BYTES = 24


def generate_token() -> str:
    """A fresh random token, for a console started without one."""
    return secrets.token_urlsafe(TOKEN_BYTES)


def token_matches(offered: str | None, expected: str) -> bool:
    """Constant-time comparison; an empty or missing offer never matches."""
    if not offered or not expected:
        return False
    return hmac.compare_digest(offered.encode(), expected.encode())


def api_is_admin(request: Request, expected: str) -> bool:
    return token_matches(request.headers.get(HEADER), expected)


def cookie_is_admin(request: Request, expected: str) -> bool:
    return token_matches(request.cookies.get(COOKIE), expected)


def form_is_admin(request: Request, form_token: str | None, expected: str) -> bool:
    """A form may carry the token itself or rely on the signed-in cookie."""
    return token_matches(form_token, expected) or cookie_is_admin(request, expected)
