"""The ASGI application: routes, error handlers, middleware and the per-process lifespan."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator

from prometheus_client import CollectorRegistry
from redis.asyncio import Redis
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from target_service import routes
from target_service.embedded_redis import EmbeddedRedis
from target_service.errors import APIError, InvalidRequest, NotFound
from target_service.metrics import TargetMetrics
from target_service.middleware.body_limit import BodyLimitMiddleware
from target_service.middleware.metrics import MetricsMiddleware
from target_service.runtime import Runtime
from target_service.settings import Settings, load_settings

log = logging.getLogger("target_service")


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        return NotFound(f"no route for {request.method} {request.url.path}").to_response()
    error = InvalidRequest(str(exc.detail))
    error.status = exc.status_code
    return error.to_response()


async def _server_error(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return APIError("internal server error", code="internal_error").to_response()


def create_app(
    settings: Settings,
    *,
    registry: CollectorRegistry | None = None,
    multiproc_dir: str | None = None,
) -> Starlette:
    """Build the app; without ``redis_url`` it starts an embedded Redis for its own lifetime."""
    metrics = TargetMetrics(registry or CollectorRegistry(), multiproc_dir)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        embedded: EmbeddedRedis | None = None
        url = settings.redis_url
        if url is None:
            embedded = EmbeddedRedis().start()
            url = embedded.url
        timeout = settings.redis_timeout_s
        redis = Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
        runtime = Runtime.build(settings, metrics, redis)
        app.state.runtime = runtime
        try:
            yield
        finally:
            await runtime.generator.drain()
            await redis.aclose()
            if embedded is not None:
                embedded.close()

    app = Starlette(
        routes=[
            Route("/v1/chat/completions", routes.chat_completions, methods=["POST"]),
            Route("/v1/models", routes.list_models, methods=["GET"]),
            Route("/v1/models/{model:path}", routes.get_model, methods=["GET"]),
            Route("/healthz", routes.healthz, methods=["GET"]),
            Route("/readyz", routes.readyz, methods=["GET"]),
            Route("/metrics", routes.metrics, methods=["GET"]),
        ],
        middleware=[
            Middleware(MetricsMiddleware, metrics=metrics),
            Middleware(BodyLimitMiddleware, max_body_bytes=settings.max_body_bytes),
        ],
        exception_handlers={
            APIError: routes.api_error,
            HTTPException: _http_error,
            Exception: _server_error,
        },
        lifespan=lifespan,
    )
    app.state.metrics = metrics
    return app


def app_from_environment() -> Starlette:
    """uvicorn's factory in each worker process: settings and metrics dir come from the env."""
    return create_app(load_settings(), multiproc_dir=os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
