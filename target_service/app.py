"""The ASGI application: routes, error handlers, middleware and the per-process lifespan.

Start-up of each worker process: open the Redis pool and pre-warm it, apply the pool capacity
rule (``redis_pool.py``), build the runtime, then start the background tasks: the key ring's
refresh, the usage counters' flush (``usage.py``) and the watcher that applies admin changes
made on other processes (``admin.py``).
A Redis that is down at start-up does not stop the process: it starts not-ready and recovers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from target_service import admin, routes
from target_service.embedded_redis import EmbeddedRedis
from target_service.errors import (
    APIError,
    InjectedDisconnect,
    InvalidRequest,
    NotFound,
    RedisUnavailable,
)
from target_service.metrics import TargetMetrics
from target_service.middleware.body_limit import BodyLimitMiddleware
from target_service.middleware.metrics import MetricsMiddleware
from target_service.middleware.process import ProcessHeaderMiddleware
from target_service.redis_pool import RedisPool
from target_service.runtime import Runtime
from target_service.settings import Settings
from target_service.shutdown import stop_tasks
from target_service.tracing import TRACER_NAME, build_provider

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

log = logging.getLogger("target_service")


def _is_injected_drop(exc: BaseException | None) -> bool:
    if isinstance(exc, InjectedDisconnect):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return all(_is_injected_drop(inner) for inner in exc.exceptions)
    return False


class _InjectedDropFilter(logging.Filter):
    """A deliberate dropped connection is not a server error: keep its traceback out of the log."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and _is_injected_drop(record.exc_info[1]))


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        return NotFound(f"no route for {request.method} {request.url.path}").to_response()
    error = InvalidRequest(str(exc.detail))
    error.status = exc.status_code
    return error.to_response()


async def _server_error(request: Request, exc: Exception) -> Response:
    if not _is_injected_drop(exc):
        log.exception("unhandled error on %s %s", request.method, request.url.path)
    return APIError("internal server error", code="internal_error").to_response()


def create_app(
    settings: Settings,
    *,
    registry: CollectorRegistry | None = None,
    multiproc_dir: str | None = None,
    span_exporter: SpanExporter | None = None,
) -> Starlette:
    """Build the app; without ``redis_url`` it starts an embedded Redis for its own lifetime.

    Traces go to ``span_exporter`` when one is given, else to ``settings.tracing.otlp_endpoint``
    when that is set; otherwise no tracing code runs at all.
    """
    metrics = TargetMetrics(registry or CollectorRegistry(), multiproc_dir)
    tracer_provider = build_provider(settings.tracing, span_exporter)
    drop_filter = _InjectedDropFilter()
    for name in ("uvicorn.error", "target_service"):
        logging.getLogger(name).addFilter(drop_filter)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        embedded: EmbeddedRedis | None = None
        url = settings.redis_url
        if url is None:
            embedded = EmbeddedRedis().start()
            url = embedded.url
        redis = RedisPool(url, settings.redis_pool, settings.redis_timeout_s, metrics)
        tasks: list[asyncio.Task[None]] = []
        runtime: Runtime | None = None
        try:
            await redis.prewarm()
            try:
                await redis.check_capacity(settings.workers)
            except RedisUnavailable as exc:
                log.warning("redis capacity check skipped: %s", exc)
            runtime = Runtime.build(settings, metrics, redis)
            runtime.process_info()
            app.state.runtime = runtime
            tasks.append(asyncio.create_task(runtime.ring.maintain(), name="keyring.maintain"))
            tasks.append(
                asyncio.create_task(runtime.generator.usage.maintain(), name="usage.maintain")
            )
            if settings.admin_token is not None:
                tasks.append(asyncio.create_task(admin.watch(runtime), name="admin.watch"))
            yield
        finally:
            await stop_tasks(tasks)
            if runtime is not None:
                await runtime.generator.drain()
                runtime.signer.close()
                runtime.clock.close()
            await redis.aclose()
            if embedded is not None:
                embedded.close()
            if tracer_provider is not None:
                tracer_provider.shutdown()  # flushes the spans still batched

    route_list = [
        Route("/v1/chat/completions", routes.chat_completions, methods=["POST"]),
        Route("/v1/completions", routes.completions, methods=["POST"]),
        Route("/v1/responses", routes.responses, methods=["POST"]),
        Route("/v1/models", routes.list_models, methods=["GET"]),
        Route("/v1/models/{model:path}", routes.get_model, methods=["GET"]),
        Route("/v1/auth/token", routes.issue_token, methods=["POST"]),
        Route("/.well-known/jwks.json", routes.jwks, methods=["GET"]),
        Route("/healthz", routes.healthz, methods=["GET"]),
        Route("/readyz", routes.readyz, methods=["GET"]),
        Route("/metrics", routes.metrics, methods=["GET"]),
        Route("/openapi.json", routes.openapi_json, methods=["GET"]),
    ]
    if settings.admin_token is not None:
        # Without a token the admin routes do not exist at all (404, not 401).
        route_list.append(Route("/admin/config", admin.get_config, methods=["GET"]))
        route_list.append(Route("/admin/config", admin.put_config, methods=["PUT"]))
    middleware = [
        Middleware(ProcessHeaderMiddleware),
        Middleware(MetricsMiddleware, metrics=metrics),
        Middleware(BodyLimitMiddleware, max_body_bytes=settings.max_body_bytes),
    ]
    if tracer_provider is not None:
        from target_service.middleware.tracing import TracingMiddleware

        # Outermost, so the span covers the other middleware and every error response.
        tracer = tracer_provider.get_tracer(TRACER_NAME)
        middleware.insert(0, Middleware(TracingMiddleware, tracer=tracer))
    app = Starlette(
        routes=route_list,
        middleware=middleware,
        exception_handlers={
            APIError: routes.api_error,
            RedisUnavailable: routes.redis_unavailable,
            HTTPException: _http_error,
            Exception: _server_error,
        },
        lifespan=lifespan,
    )
    app.state.metrics = metrics
    return app
