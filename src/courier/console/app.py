"""The console application: routes, static files, error pages and the lifespan.

    app = create_app(settings.ConsoleSettings(dsn=..., admin_token=...))
    uvicorn.run(app, port=8080)

``serving`` does that last step for `courier console` and for the tests.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles

from courier import errors
from courier.console import admin, api, guard, headers, pages, sessions, settings, signin, state
from courier.db import _translate

STATIC_DIR = Path(__file__).parent / "static"
MAX_REQUEST_BODY_BYTES = 64 * 1024

HTTP_STATUS: dict[type[errors.CourierError], int] = {
    errors.NotAuthorised: 403,
    errors.QueueNotFound: 404,
    errors.ClientNotFound: 404,
    errors.NoMessage: 404,
    errors.QueueExists: 409,
    errors.QueueNotEmpty: 409,
    errors.ClientExists: 409,
    errors.BadRequest: 400,
    errors.Unavailable: 503,
}


def http_status(exc: errors.CourierError) -> int:
    """The HTTP status for a Courier error: the nearest listed ancestor decides."""
    for cls in type(exc).__mro__:
        if cls in HTTP_STATUS:
            return HTTP_STATUS[cls]
    return 500


def wants_json(request: Request) -> bool:
    return request.url.path.startswith("/api/")


async def courier_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, errors.CourierError)
    status_code = http_status(exc)
    if wants_json(request):
        body = {"error": type(exc).__name__, "status": exc.status.name, "message": exc.message}
        return JSONResponse(body, status_code=status_code)
    title = "Admin token needed" if status_code == 403 else type(exc).__name__
    return pages.error_page(request, status_code, title, exc.message)


async def database_error(request: Request, exc: Exception) -> Response:
    """A driver failure in a console read, translated where the repository's are."""
    return await courier_error(request, _translate.translate(exc))


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if wants_json(request):
        return JSONResponse({"error": "HTTPError", "message": exc.detail}, exc.status_code)
    return pages.error_page(request, exc.status_code, f"Error {exc.status_code}", exc.detail)


def all_routes() -> list[BaseRoute]:
    static = Mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    return [*api.routes, *admin.routes, *signin.routes, *pages.routes, static]


def create_app(console_settings: settings.ConsoleSettings) -> Starlette:
    store = sessions.SessionStore(console_settings.session_ttl_s)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, state.ConsoleState]]:
        async with state.opened(console_settings, store) as console:
            yield {state.STATE_KEY: console}

    return Starlette(
        routes=all_routes(),
        middleware=[
            Middleware(headers.SecurityHeaders),  # outermost: refusals get them too
            Middleware(guard.Guard, console=console_settings, store=store),
        ],
        lifespan=lifespan,
        exception_handlers={
            errors.CourierError: courier_error,
            HTTPException: http_error,
            **{cls: database_error for cls in _translate.TRANSLATED},
        },
        max_body_size=MAX_REQUEST_BODY_BYTES,
    )
