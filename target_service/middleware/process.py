"""Adds ``x-target-pid`` to every response, so clients and tests can tell worker processes apart."""

from __future__ import annotations

import os
from collections.abc import Awaitable

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class ProcessHeaderMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._header = (b"x-target-pid", str(os.getpid()).encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        # A plain function handing back the inner send's awaitable: no coroutine of its own per
        # message, which for a stream is per SSE event (measured in bench/target_stream.py).
        def with_pid(message: Message) -> Awaitable[None]:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), self._header]
            return send(message)

        await self.app(scope, receive, with_pid)
