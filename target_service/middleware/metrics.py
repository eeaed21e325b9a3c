"""Request duration by route template (never the raw path: it would explode the label set)."""

from __future__ import annotations

import time
from collections.abc import Awaitable

from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from target_service.metrics import TargetMetrics


class MetricsMiddleware:
    def __init__(self, app: ASGIApp, metrics: TargetMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        # Not a coroutine itself (see middleware/process.py): it runs once per SSE event.
        def timed_send(message: Message) -> Awaitable[None]:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            return send(message)

        try:
            await self.app(scope, receive, timed_send)
        finally:
            self.metrics.request_duration.labels(
                scope["method"], route_template(scope), str(status)
            ).observe(time.perf_counter() - start)


def route_template(scope: Scope) -> str:
    route = scope.get("route")
    if route is not None and hasattr(route, "path"):
        return str(route.path)
    app = scope.get("app")
    for candidate in getattr(app, "routes", ()):
        match, _ = candidate.matches(scope)
        if match == Match.FULL:
            return str(candidate.path)
    return "unmatched"
