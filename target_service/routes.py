"""HTTP handlers: the OpenAI endpoints, health and metrics."""

from __future__ import annotations

import asyncio
import hashlib
import os
import time

import orjson
from redis.exceptions import RedisError
from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.responses import Response

from target_service.errors import APIError, NotFound
from target_service.runtime import Runtime
from target_service.wire import models_body, parse_chat_request

STARTED = int(time.time())


def _runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


def json_response(
    body: object, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    return Response(
        orjson.dumps(body), status_code=status, media_type="application/json", headers=headers
    )


def client_identity(request: Request) -> str:
    """A stable, non-secret name for the caller: a hash of its credential, never the credential."""
    authorization = request.headers.get("authorization", "")
    if not authorization:
        return "anonymous"
    return "key-" + hashlib.sha256(authorization.encode()).hexdigest()[:16]


async def chat_completions(request: Request) -> Response:
    runtime = _runtime(request)
    body = await request.body()
    chat = parse_chat_request(body)
    completion = await runtime.generator.prepare(chat, client_identity(request))
    if not chat.stream:
        result, timing = await runtime.generator.complete(completion)
        return json_response(result, headers={"server-timing": timing})
    stream = runtime.settings.stream
    return EventSourceResponse(
        runtime.generator.stream(completion),
        headers={"server-timing": completion.server_timing()},
        sep="\n",
        ping=stream.ping_s,
        send_timeout=stream.send_timeout_s,
    )


async def list_models(request: Request) -> Response:
    return json_response(models_body(_runtime(request).settings.models, STARTED))


async def get_model(request: Request) -> Response:
    name = request.path_params["model"]
    models = _runtime(request).settings.models
    if name not in models:
        raise NotFound(f"The model '{name}' does not exist", code="model_not_found", param="model")
    return json_response(models_body([name], STARTED)["data"][0])


async def healthz(request: Request) -> Response:
    # The pid lets a caller see which of several worker processes answered.
    return json_response({"status": "ok", "pid": os.getpid()})


async def readyz(request: Request) -> Response:
    runtime = _runtime(request)
    try:
        async with asyncio.timeout(runtime.settings.redis_timeout_s):
            await runtime.redis.ping()
    except (RedisError, OSError, TimeoutError) as exc:
        return json_response(
            {"status": "not ready", "redis": f"unreachable: {type(exc).__name__}"}, status=503
        )
    return json_response({"status": "ready", "redis": "ok"})


async def metrics(request: Request) -> Response:
    return Response(
        _runtime(request).metrics.render(),
        media_type="text/plain; version=0.0.4; charset=utf-8",
    )


async def api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, APIError)
    return exc.to_response()
