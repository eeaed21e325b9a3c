"""Adds ``x-target-pid`` to every response, so clients and tests can tell worker processes apart."""

from __future__ import annotations

import os

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class ProcessHeaderMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._header = (b"x-target-pid", str(os.getpid()).encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_pid(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), self._header]
            await send(message)

        await self.app(scope, receive, with_pid)
