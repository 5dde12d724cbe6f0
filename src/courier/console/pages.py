"""The HTML pages: each renders the same data as its JSON twin, which it then polls."""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.templating import Jinja2Templates

from courier.console import auth, data, formatting, params, sessions, state

TEMPLATES_DIR = Path(__file__).parent / "templates"
NOTICES = {
    "created": "Queue created.",
    "deleted": "Deleted.",
    "signed_in": "Signed in as admin.",
    "viewing": "Signed in.",
    "redriven": "Dead letters moved back to the queues they failed in: {count}.",
}


class Blank:
    """A row whose every field is empty: what the client-side row templates render from."""

    def __getattr__(self, name: str) -> None:
        return None


def url_with(request: Request, name: str, value: object) -> str:
    """This page's URL with one query parameter set."""
    query = dict(request.query_params)
    query[name] = str(value)
    return f"{request.url.path}?{urllib.parse.urlencode(query)}"


def build_templates() -> Jinja2Templates:
    templates = Jinja2Templates(directory=TEMPLATES_DIR)
    templates.env.filters.update(formatting.FILTERS)
    templates.env.globals.update(url_with=url_with, blank=Blank())
    return templates


templates = build_templates()


def api_url(request: Request, path: str) -> str:
    query = request.url.query
    return f"{path}?{query}" if query else path


def notice(request: Request) -> str | None:
    """The notice an admin action's redirect asked for; a count must be a number."""
    for key, text in NOTICES.items():
        value = request.query_params.get(key)
        if value is not None and ("{count}" not in text or (value.isascii() and value.isdigit())):
            return text.format(count=value)
    return None


def render(
    request: Request, name: str, section: str, page: Any = None, api: str | None = None
) -> Response:
    console = state.of(request)
    role = auth.session_role(request, console.sessions)
    context = {
        "page": page,
        "section": section,
        "api_url": api,
        "refresh_ms": console.settings.refresh_ms,
        "is_admin": role is sessions.Role.ADMIN,
        "signed_in": role is not None,
        "viewer_token_needed": console.settings.viewer_token is not None,
        "notice": notice(request),
        "csrf_token": auth.csrf_token(request, console.sessions),
    }
    return templates.TemplateResponse(request, name, context)


async def overview(request: Request) -> Response:
    page = await data.overview(state.of(request))
    return render(request, "overview.html", "Overview", page, "/api/overview")


async def clients(request: Request) -> Response:
    page = await data.client_list(state.of(request), request.query_params)
    return render(request, "clients.html", "Clients", page, api_url(request, "/api/clients"))


async def client(request: Request) -> Response:
    client_id = params.path_id(request.path_params, "client_id")
    page = await data.client_detail(state.of(request), client_id, request.query_params)
    api = api_url(request, f"/api/clients/{client_id}")
    return render(request, "client.html", "Clients", page, api)


async def queues(request: Request) -> Response:
    page = await data.queue_list(state.of(request), request.query_params)
    return render(request, "queues.html", "Queues", page, api_url(request, "/api/queues"))


async def topics(request: Request) -> Response:
    page = await data.topic_list(state.of(request), request.query_params)
    return render(request, "topics.html", "Topics", page, api_url(request, "/api/topics"))


async def cluster(request: Request) -> Response:
    page = await data.cluster(state.of(request), request.query_params)
    return render(request, "cluster.html", "Cluster", page, api_url(request, "/api/cluster"))


async def queue(request: Request) -> Response:
    queue_id = params.path_id(request.path_params, "queue_id")
    page = await data.queue_detail(state.of(request), queue_id, request.query_params)
    api = api_url(request, f"/api/queues/{queue_id}/messages")
    return render(request, "queue.html", "Queues", page, api)


async def message(request: Request) -> Response:
    message_id = params.path_id(request.path_params, "message_id")
    page = await data.message_detail(state.of(request), message_id)
    return render(request, "message.html", "Queues", page, f"/api/messages/{message_id}")


async def admin(request: Request) -> Response:
    return render(request, "admin.html", "Admin")


def error_page(request: Request, status_code: int, title: str, message: str) -> Response:
    context = {
        "section": "",
        "api_url": None,
        "is_admin": False,
        "notice": None,
        "status_code": status_code,
        "title": title,
        "message": message,
    }
    return templates.TemplateResponse(request, "error.html", context, status_code=status_code)


routes = [
    Route("/", overview),
    Route("/clients", clients),
    Route("/clients/{client_id:int}", client),
    Route("/queues", queues, methods=["GET"]),
    Route("/queues/{queue_id:int}", queue),
    Route("/topics", topics),
    Route("/cluster", cluster),
    Route("/messages/{message_id:int}", message),
    Route("/admin", admin),
]
