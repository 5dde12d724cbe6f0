"""The read-only JSON API: one endpoint behind every page (documented in docs/console.md)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from courier.console import data, params, rows, state


def as_json(value: object, status_code: int = 200) -> JSONResponse:
    return JSONResponse(rows.jsonable(value), status_code=status_code)


async def overview(request: Request) -> JSONResponse:
    return as_json(await data.overview(state.of(request)))


async def rates(request: Request) -> JSONResponse:
    return as_json(state.of(request).sampler.rates())


async def clients(request: Request) -> JSONResponse:
    return as_json(await data.client_list(state.of(request), request.query_params))


async def client(request: Request) -> JSONResponse:
    client_id = params.path_id(request.path_params, "client_id")
    return as_json(await data.client_detail(state.of(request), client_id, request.query_params))


async def queues(request: Request) -> JSONResponse:
    return as_json(await data.queue_list(state.of(request), request.query_params))


async def topics(request: Request) -> JSONResponse:
    return as_json(await data.topic_list(state.of(request), request.query_params))


async def cluster(request: Request) -> JSONResponse:
    return as_json(await data.cluster(state.of(request), request.query_params))


async def queue_messages(request: Request) -> JSONResponse:
    queue_id = params.path_id(request.path_params, "queue_id")
    return as_json(await data.queue_detail(state.of(request), queue_id, request.query_params))


async def message(request: Request) -> JSONResponse:
    message_id = params.path_id(request.path_params, "message_id")
    return as_json(await data.message_detail(state.of(request), message_id))


routes = [
    Route("/api/overview", overview, name="api_overview"),
    Route("/api/rates", rates, name="api_rates"),
    Route("/api/clients", clients, name="api_clients"),
    Route("/api/clients/{client_id:int}", client, name="api_client"),
    Route("/api/queues", queues, name="api_queues", methods=["GET"]),
    Route("/api/topics", topics, name="api_topics"),
    Route("/api/cluster", cluster, name="api_cluster"),
    Route("/api/queues/{queue_id:int}/messages", queue_messages, name="api_queue_messages"),
    Route("/api/messages/{message_id:int}", message, name="api_message", methods=["GET"]),
]
