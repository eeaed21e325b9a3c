"""HTTP handlers: the OpenAI endpoints, the token endpoint and JWKS, health and metrics.

The three generation endpoints — chat completions, legacy completions, the Responses API — are
one handler over the request model of each (``wire.py``). A request passes, in order:
authentication (401), the GCRA limiter (429), injected faults (429/503), validation (400), the
scheduler (503 when full), prefill; ``auth`` and ``ratelimit`` join ``queue`` and ``prefill`` in
``Server-Timing``.
"""

from __future__ import annotations

import base64
import binascii
import os
import time
from urllib.parse import parse_qs

import anyio
import orjson
from starlette.requests import Request
from starlette.responses import Response

from target_service.auth import Caller
from target_service.completions_api import CompletionRequest
from target_service.errors import (
    APIError,
    InvalidRequest,
    NotFound,
    RateLimited,
    RedisUnavailable,
    Unavailable,
)
from target_service.openapi import document
from target_service.ratelimit import Decision
from target_service.responses_api import ResponsesRequest
from target_service.runtime import Runtime
from target_service.shutdown import SSE_GRACE_S
from target_service.sse import StreamResponse
from target_service.wire import ChatCompletionRequest, GenerationRequest, models_body, parse_request

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


async def _admit(runtime: Runtime, request: Request) -> tuple[Caller, Decision, float]:
    caller = await runtime.auth.authenticate(request.headers.get("authorization", ""))
    start = time.perf_counter()
    decision = await runtime.limiter.check(caller.identity)
    limit_s = time.perf_counter() - start
    if not decision.allowed:
        raise RateLimited(
            f"Rate limit reached for requests ({decision.scope} limit {decision.limit} per "
            f"{runtime.settings.ratelimit.period_s:g}s)",
            code="rate_limit_exceeded",
            retry_after_s=decision.retry_after_s,
            headers=decision.headers(),
        )
    fault = runtime.faults.before_stream(runtime.scheduler.waiting)
    if fault is not None:
        raise fault
    return caller, decision, limit_s


async def chat_completions(request: Request) -> Response:
    return await _generate(request, ChatCompletionRequest)


async def completions(request: Request) -> Response:
    return await _generate(request, CompletionRequest)


async def responses(request: Request) -> Response:
    return await _generate(request, ResponsesRequest)


async def _generate(request: Request, model: type[GenerationRequest]) -> Response:
    runtime = _runtime(request)
    caller, decision, limit_s = await _admit(runtime, request)
    body = await request.body()
    asked = parse_request(body, model)
    completion = await runtime.generator.prepare(asked, caller.identity)
    completion.pre_timing = (
        f"auth;dur={caller.auth_s * 1000:.3f}, ratelimit;dur={limit_s * 1000:.3f}"
    )
    headers = decision.headers()
    session = runtime.settings.session_header
    if session and (session_id := request.headers.get(session)):
        headers[session] = session_id
    if not asked.stream:
        result, timing, signature = await runtime.generator.complete(completion)
        return json_response(result, headers={**headers, **signature, "server-timing": timing})
    stream = runtime.settings.stream
    shutdown = anyio.Event()
    return StreamResponse(
        runtime.generator.stream(completion, shutdown),
        headers={**headers, "server-timing": completion.server_timing()},
        sep="\n",
        ping=stream.ping_s,
        send_timeout=stream.send_timeout_s,
        shutdown_event=shutdown,
        shutdown_grace_period=SSE_GRACE_S,
    )


def _basic_credentials(authorization: str) -> tuple[str, str] | None:
    scheme, _, encoded = authorization.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        client_id, sep, secret = base64.b64decode(encoded, validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return (client_id, secret) if sep else None


async def issue_token(request: Request) -> Response:
    """Client credentials as JSON, as an OAuth form, or as HTTP Basic (``client_secret_basic``)."""
    runtime = _runtime(request)
    body = await request.body()
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    fields: dict[str, str] = {}
    if content_type == "application/x-www-form-urlencoded":
        form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        fields = {key: values[0] for key, values in form.items()}
        if fields.get("grant_type") != "client_credentials":
            raise InvalidRequest(
                "grant_type must be client_credentials",
                code="unsupported_grant_type",
                param="grant_type",
            )
    elif body:
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise InvalidRequest("request body is not valid JSON", code="invalid_json") from None
        if not isinstance(data, dict):
            raise InvalidRequest("request body must be a JSON object", code="invalid_json")
        fields = {k: v for k, v in data.items() if isinstance(v, str)}
    basic = _basic_credentials(request.headers.get("authorization", ""))
    if basic is not None:
        fields.setdefault("client_id", basic[0])
        fields.setdefault("client_secret", basic[1])
    for name in ("client_id", "client_secret"):
        if not fields.get(name):
            raise InvalidRequest(f"missing {name}", code="invalid_request", param=name)
    token = await runtime.auth.issue(fields["client_id"], fields["client_secret"])
    return json_response(token, headers={"cache-control": "no-store"})


async def jwks(request: Request) -> Response:
    runtime = _runtime(request)
    keys = [jwk for key in await runtime.ring.published() for jwk in key.public_jwks()]
    # Well under one period, so a cached JWKS always holds the next key before it signs.
    max_age = max(1, min(300, runtime.ring.period_s // 4))
    return json_response({"keys": keys}, headers={"cache-control": f"public, max-age={max_age}"})


async def list_models(request: Request) -> Response:
    runtime = _runtime(request)
    await runtime.auth.authenticate(request.headers.get("authorization", ""))
    return json_response(models_body(runtime.settings.models, STARTED))


async def get_model(request: Request) -> Response:
    runtime = _runtime(request)
    await runtime.auth.authenticate(request.headers.get("authorization", ""))
    name = request.path_params["model"]
    models = runtime.settings.models
    if name not in models:
        raise NotFound(f"The model '{name}' does not exist", code="model_not_found", param="model")
    return json_response(models_body([name], STARTED)["data"][0])


async def healthz(request: Request) -> Response:
    # The pid lets a caller see which of several worker processes answered.
    return json_response({"status": "ok", "pid": os.getpid()})


async def readyz(request: Request) -> Response:
    runtime = _runtime(request)
    try:
        await runtime.redis.run("ping", lambda r: r.ping())
    except RedisUnavailable as exc:
        return json_response(
            {"status": "not ready", "redis": f"unreachable: {exc}"},
            status=503,
            headers={"retry-after": "1"},
        )
    return json_response({"status": "ready", "redis": "ok"})


async def openapi_json(request: Request) -> Response:
    return json_response(document(tuple(_runtime(request).settings.models)))


async def metrics(request: Request) -> Response:
    return Response(
        _runtime(request).metrics.render(),
        media_type="text/plain; version=0.0.4; charset=utf-8",
    )


async def api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, APIError)
    return exc.to_response()


async def redis_unavailable(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RedisUnavailable)
    return Unavailable(
        "The service is temporarily unavailable (its Redis does not answer); retry later",
        code="redis_unavailable",
        retry_after_s=_runtime(request).settings.redis_pool.retry_after_s,
    ).to_response()
