"""The admin actions: create a queue, delete a queue, delete a message, and move
dead letters back to the queues they failed in ("redrive": a queue's all, or one).

Each exists twice, once in the JSON API (token in the X-Courier-Admin-Token header)
and once as an HTML form (token in a form field, or an admin session and its CSRF
token: see signin). Without the right token every one of them answers 403 and
changes nothing. Every action done is logged (logger ``courier.console.audit``):
who (the API token, the form's token or a session, and from where) and what.
"""

from __future__ import annotations

import hashlib
import json
import logging
import urllib.parse

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from courier import errors
from courier.console import api, auth, params, queries, state

audit = logging.getLogger("courier.console.audit")


def require_api_token(request: Request) -> state.ConsoleState:
    console = state.of(request)
    if not auth.api_is_admin(request, console.settings.admin_token):
        raise errors.NotAuthorised(f"admin token missing or wrong ({auth.HEADER} header)")
    return console


async def form_fields(request: Request) -> dict[str, str]:
    """An urlencoded form body as a dict (the last value of a repeated field wins)."""
    body = (await request.body()).decode("utf-8", errors="replace")
    return dict(urllib.parse.parse_qsl(body, keep_blank_values=True))


async def require_form_token(request: Request) -> tuple[state.ConsoleState, dict[str, str]]:
    console = state.of(request)
    fields = await form_fields(request)
    offered = fields.get(auth.FORM_FIELD)
    if auth.token_matches(offered, console.settings.admin_token):
        return console, fields  # the token itself: nothing another site could forge
    if not auth.cookie_is_admin(request, console.sessions):
        raise errors.NotAuthorised("the admin token is missing or wrong")
    require_csrf(request, fields, console)
    return console, fields


def require_csrf(request: Request, fields: dict[str, str], console: state.ConsoleState) -> None:
    """A form relying on the session must carry the session's CSRF token."""
    if not auth.csrf_matches(request, fields.get(auth.CSRF_FORM_FIELD), console.sessions):
        raise errors.NotAuthorised(
            "the form's CSRF token is missing or wrong: reload the page and try again"
        )


def who(request: Request, fields: dict[str, str] | None = None) -> str:
    """Who acts, for the audit log: how they proved it and from where; a session
    is named by a digest of its id, which cannot be turned back into the cookie."""
    if fields is None:
        return f"api token from {peer(request)}"
    if fields.get(auth.FORM_FIELD):
        return f"form token from {peer(request)}"
    session_id = request.cookies.get(auth.COOKIE, "")
    digest = hashlib.sha256(session_id.encode()).hexdigest()[:12]
    return f"session {digest} from {peer(request)}"


def peer(request: Request) -> str:
    return f"{request.client.host}:{request.client.port}" if request.client else "?"


def log_action(request: Request, what: str, fields: dict[str, str] | None = None) -> None:
    audit.info("admin action by %s: %s", who(request, fields), what)


def wants_if_empty(value: str | None) -> bool:
    """Refuse to delete a queue that still holds messages (default: delete them too)."""
    return (value or "").lower() in {"1", "true", "yes", "on"}


async def json_object(request: Request) -> dict[str, object]:
    """The request's JSON object body; an empty body is an empty object."""
    try:
        payload = json.loads(await request.body() or b"{}")
    except json.JSONDecodeError as exc:
        raise errors.BadRequest(f"body is not JSON: {exc.msg}") from None
    if not isinstance(payload, dict):
        raise errors.BadRequest("body must be a JSON object")
    return payload


async def redrive(
    console: state.ConsoleState, queue_id: int, message_ids: list[int] | None = None
) -> int:
    """Move dead letters of an existing queue back; how many moved. QueueNotFound."""
    await queries.queue(console.pool, queue_id, console.settings.count_cap)
    return await console.repository.redrive(queue_id, message_ids)


# -- JSON API ---------------------------------------------------------------------
async def api_create_queue(request: Request) -> JSONResponse:
    console = require_api_token(request)
    payload = await json_object(request)
    queue = await console.repository.create_queue(params.queue_name(payload))
    log_action(request, f"created queue {queue.name!r} (id {queue.id})")
    return api.as_json({"queue": queue}, status_code=201)


async def api_delete_queue(request: Request) -> JSONResponse:
    console = require_api_token(request)
    queue_id = params.path_id(request.path_params, "queue_id")
    if_empty = wants_if_empty(request.query_params.get("if_empty"))
    await console.repository.delete_queue(queue_id, if_empty=if_empty)
    log_action(request, f"deleted queue {queue_id}")
    return api.as_json({"deleted": {"queue": queue_id}})


async def api_delete_message(request: Request) -> JSONResponse:
    console = require_api_token(request)
    message_id = params.path_id(request.path_params, "message_id")
    queue_id = await console.repository.delete_message(message_id)
    log_action(request, f"deleted message {message_id} of queue {queue_id}")
    return api.as_json({"deleted": {"message": message_id, "queue": queue_id}})


async def api_redrive(request: Request) -> JSONResponse:
    console = require_api_token(request)
    queue_id = params.path_id(request.path_params, "queue_id")
    message_ids = params.message_ids(await json_object(request))
    moved = await redrive(console, queue_id, message_ids)
    log_action(request, f"moved {moved} dead letters of queue {queue_id} back")
    return api.as_json({"redriven": {"queue": queue_id, "moved": moved}})


# -- HTML forms -------------------------------------------------------------------
async def form_create_queue(request: Request) -> Response:
    console, fields = await require_form_token(request)
    queue = await console.repository.create_queue(params.queue_name(fields))
    log_action(request, f"created queue {queue.name!r} (id {queue.id})", fields)
    return RedirectResponse(f"/queues/{queue.id}?created=1", status_code=303)


async def form_delete_queue(request: Request) -> Response:
    console, fields = await require_form_token(request)
    queue_id = params.path_id(request.path_params, "queue_id")
    await console.repository.delete_queue(queue_id, if_empty=wants_if_empty(fields.get("if_empty")))
    log_action(request, f"deleted queue {queue_id}", fields)
    return RedirectResponse(f"/queues?deleted={queue_id}", status_code=303)


async def form_delete_message(request: Request) -> Response:
    console, fields = await require_form_token(request)
    message_id = params.path_id(request.path_params, "message_id")
    queue_id = await console.repository.delete_message(message_id)
    log_action(request, f"deleted message {message_id} of queue {queue_id}", fields)
    return RedirectResponse(f"/queues/{queue_id}?deleted={message_id}", status_code=303)


async def form_redrive(request: Request) -> Response:
    console, fields = await require_form_token(request)
    queue_id = params.path_id(request.path_params, "queue_id")
    moved = await redrive(console, queue_id)
    log_action(request, f"moved {moved} dead letters of queue {queue_id} back", fields)
    return RedirectResponse(f"/queues/{queue_id}?redriven={moved}", status_code=303)


async def form_redrive_message(request: Request) -> Response:
    """Move one dead letter back; NoMessage when it is not (or no longer) one here."""
    console, fields = await require_form_token(request)
    queue_id = params.path_id(request.path_params, "queue_id")
    message_id = params.path_id(request.path_params, "message_id")
    if not await redrive(console, queue_id, [message_id]):
        raise errors.NoMessage(
            f"message {message_id} is not a dead letter in queue {queue_id} that can move"
            " back (it moved or was deleted already, or the queue it failed in is gone)"
        )
    log_action(request, f"moved dead letter {message_id} of queue {queue_id} back", fields)
    return RedirectResponse(f"/queues/{queue_id}?redriven=1", status_code=303)


routes = [
    Route("/api/queues", api_create_queue, methods=["POST"]),
    Route("/api/queues/{queue_id:int}", api_delete_queue, methods=["DELETE"]),
    Route("/api/messages/{message_id:int}", api_delete_message, methods=["DELETE"]),
    Route("/api/queues/{queue_id:int}/redrive", api_redrive, methods=["POST"]),
    Route("/queues", form_create_queue, methods=["POST"]),
    Route("/queues/{queue_id:int}/delete", form_delete_queue, methods=["POST"]),
    Route("/messages/{message_id:int}/delete", form_delete_message, methods=["POST"]),
    Route("/queues/{queue_id:int}/redrive", form_redrive, methods=["POST"]),
    Route(
        "/queues/{queue_id:int}/messages/{message_id:int}/redrive",
        form_redrive_message,
        methods=["POST"],
    ),
]
