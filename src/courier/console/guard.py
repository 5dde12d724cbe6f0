"""The gate in front of every route, static files included: the Host check, the
same-origin check for actions, then the viewer check for reads. Admin actions check
the admin token in their routes.

A refused request gets a short error page (or JSON under /api/) and no data.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from courier.console import auth, hosts, pages, sessions, settings

READ_METHODS = frozenset({"GET", "HEAD"})
OPEN_PATHS = ("/admin", "/static/")  # the sign-in page and its style hold no data


def refusal(request: Request, status_code: int, error: str, title: str, message: str) -> Response:
    if request.url.path.startswith("/api/"):
        body = {"error": error, "status": "NOT_AUTHORISED", "message": message}
        return JSONResponse(body, status_code=status_code)
    return pages.error_page(request, status_code, title, message)


def needs_viewer(request: Request) -> bool:
    """Reads need the viewer's right; every other method is an admin action (or
    signing in or out), which checks its own token."""
    path = request.scope["path"]  # what the router matches, percent-decoded
    open_path = path == OPEN_PATHS[0] or path.startswith(OPEN_PATHS[1])
    return request.method in READ_METHODS and not open_path


def same_origin(request: Request) -> bool:
    """An action sent by a browser must come from the console's own pages: the page's
    Origin names the Host the request went to. A page on another port of this machine
    is the same site, so the session cookie would go with it: SameSite alone does not
    stop it. Tools that send no Origin (curl with a token) pass."""
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    if origin is None:
        return True
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and parts.netloc == request.headers.get("host")


class Guard:
    """ASGI middleware: refuses foreign Host headers and unauthorised reads."""

    def __init__(
        self, app: ASGIApp, console: settings.ConsoleSettings, store: sessions.SessionStore
    ) -> None:
        self.app = app
        self.console = console
        self.store = store

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refused = self.check(Request(scope))
            if refused is not None:
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def check(self, request: Request) -> Response | None:
        if self.console.checks_host and not self.host_allowed(request):
            host = request.headers.get("host", "")
            message = (
                f"this console does not answer to Host {host!r}: open it as"
                " http://127.0.0.1:<port>/ or allow the name with --allowed-host"
            )
            return refusal(request, 421, "HostNotAllowed", "Host not allowed", message)
        if request.method not in READ_METHODS and not same_origin(request):
            message = "actions are taken only from this console's own pages"
            return refusal(request, 403, "CrossOrigin", "Cross-origin request refused", message)
        if needs_viewer(request) and not self.may_read(request):
            message = (
                "reading needs the viewer token: sign in on /admin, or send"
                " 'Authorization: Bearer <viewer token>'"
            )
            response = refusal(request, 401, "NotAuthorised", "Sign in needed", message)
            response.headers["WWW-Authenticate"] = 'Bearer realm="courier console"'
            return response
        return None

    def host_allowed(self, request: Request) -> bool:
        server = request.scope.get("server")
        port = int(server[1]) if server else self.console.port
        allowed = hosts.allow_list(port, self.console.allowed_hosts)
        return hosts.allows(allowed, request.headers.get("host"))

    def may_read(self, request: Request) -> bool:
        console = self.console
        return auth.may_read(request, console.admin_token, console.viewer_token, self.store)
