"""Signing in and out: a token in, a session cookie out (see ``sessions``).

``/admin/sign-in`` takes the admin token, ``/sign-in`` the viewer token (or the
admin token: it may read too). Each sign-in starts a new session and ends the
browser's previous one; signing out ends the session in this process, so a copied
cookie stops working too.
"""

from __future__ import annotations

import math

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from courier import errors
from courier.console import admin, auth, pages, sessions, state


def with_session(request: Request, role: sessions.Role, to: str) -> Response:
    """Redirect to ``to`` with a fresh session of ``role`` in the cookie."""
    store = state.of(request).sessions
    store.end(request.cookies.get(auth.COOKIE))
    response = RedirectResponse(to, status_code=303)
    response.set_cookie(
        auth.COOKIE,
        store.create(role),
        max_age=math.ceil(store.ttl_s),
        httponly=True,
        samesite="strict",
    )
    return response


async def admin_sign_in(request: Request) -> Response:
    console = state.of(request)
    offered = (await admin.form_fields(request)).get(auth.FORM_FIELD)
    if not auth.token_matches(offered, console.settings.admin_token):
        admin.audit.warning("admin sign-in refused: wrong token from %s", admin.peer(request))
        raise errors.NotAuthorised("wrong admin token")
    admin.log_action(request, "signed in as admin", {auth.FORM_FIELD: "given"})
    return with_session(request, sessions.Role.ADMIN, "/admin?signed_in=1")


async def viewer_sign_in(request: Request) -> Response:
    console = state.of(request)
    offered = (await admin.form_fields(request)).get(auth.VIEWER_FORM_FIELD)
    if auth.token_matches(offered, console.settings.admin_token):
        admin.log_action(request, "signed in as admin", {auth.FORM_FIELD: "given"})
        return with_session(request, sessions.Role.ADMIN, "/admin?signed_in=1")
    if not auth.token_matches(offered, console.settings.viewer_token):
        return pages.error_page(request, 401, "Wrong viewer token", "wrong viewer token")
    return with_session(request, sessions.Role.VIEWER, "/?viewing=1")


async def sign_out(request: Request) -> Response:
    """Ending a session is an action of that session: it carries its CSRF token
    (without a live session there is nothing to end)."""
    console = state.of(request)
    if auth.session_role(request, console.sessions) is not None:
        admin.require_csrf(request, await admin.form_fields(request), console)
    console.sessions.end(request.cookies.get(auth.COOKIE))
    response = RedirectResponse("/admin", status_code=303)
    response.delete_cookie(auth.COOKIE, httponly=True, samesite="strict")
    return response


routes = [
    Route("/admin/sign-in", admin_sign_in, methods=["POST"]),
    Route("/sign-in", viewer_sign_in, methods=["POST"]),
    Route("/admin/sign-out", sign_out, methods=["POST"]),
]
