"""One OpenTelemetry SERVER span per HTTP request, named after the route template.

The span covers the whole response, streamed body included; the phases inside it are events
(``target_service/tracing.py``). A ``traceparent`` header from the client makes it a child of
the client's trace.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from target_service.middleware.metrics import route_template
from target_service.tracing import current_span

_PROPAGATOR = TraceContextTextMapPropagator()


class TracingMiddleware:
    def __init__(self, app: ASGIApp, tracer: trace.Tracer) -> None:
        self.app = app
        self.tracer = tracer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method = scope["method"]
        carrier: dict[str, Any] = {
            name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]
        }
        span = self.tracer.start_span(
            method,
            context=_PROPAGATOR.extract(carrier),
            kind=SpanKind.SERVER,
            attributes={"http.request.method": method, "url.path": scope["path"]},
        )
        token = current_span.set(span)
        status = 500

        async def traced_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                span.set_attribute("http.response.status_code", status)
            await send(message)

        try:
            await self.app(scope, receive, traced_send)
        except BaseException as exc:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise
        finally:
            route = route_template(scope)
            span.update_name(f"{method} {route}")
            span.set_attribute("http.route", route)
            if status >= 500:
                span.set_status(Status(StatusCode.ERROR))
            current_span.reset(token)
            span.end()
