"""Refuses request bodies over ``max_body_bytes`` before they are buffered."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from target_service.errors import BodyTooLarge


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    def _too_large(self) -> BodyTooLarge:
        return BodyTooLarge(
            f"request body exceeds the limit of {self.max_body_bytes} bytes",
            code="request_too_large",
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length":
                if not value.isdigit() or int(value) > self.max_body_bytes:
                    await self._too_large().to_response()(scope, receive, send)
                    return
                break
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    # Chunked uploads have no length up front; the handler turns this into a 413.
                    raise self._too_large()
            return message

        await self.app(scope, limited_receive, send)
