"""``StreamResponse``'s send timeout: one timer per stream in place of a cancel scope per send.

Driven as an ASGI app with a ``send`` that stops accepting (a client that stopped reading) and a
``receive`` that never reports a disconnect; the end-to-end check with a real socket is in
``test_scheduler.py``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from sse_starlette.sse import SendTimeoutError
from starlette.types import Message

from target_service.sse import StreamResponse

SCOPE = {"type": "http", "method": "POST", "path": "/", "headers": []}


async def _never_disconnects() -> Message:
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


def test_a_send_that_never_returns_ends_the_response_after_send_timeout() -> None:
    closed: list[str] = []
    sent: list[bytes] = []

    async def events() -> AsyncIterator[bytes]:
        try:
            for index in range(10):
                yield f"data: {index}\n\n".encode()
        finally:
            closed.append("closed")

    async def send(message: Message) -> None:
        if message["type"] == "http.response.body" and len(sent) == 3:
            await asyncio.Event().wait()  # the client stopped reading
        sent.append(message.get("body", b""))

    async def run() -> float:
        response = StreamResponse(events(), sep="\n", ping=0, send_timeout=0.2)
        started = time.perf_counter()
        # Raised out of the response, as sse-starlette's own timeout does.
        with pytest.raises(SendTimeoutError):
            await response(SCOPE, _never_disconnects, send)
        return time.perf_counter() - started

    elapsed = asyncio.run(asyncio.wait_for(run(), timeout=10))
    assert sent == [b"", b"data: 0\n\n", b"data: 1\n\n"]
    assert closed == ["closed"]  # the generator was closed, so the target counts send_failed
    assert elapsed >= 0.2  # never before the timeout


def test_a_slow_reader_that_keeps_up_within_the_timeout_gets_every_event() -> None:
    sent: list[bytes] = []

    async def events() -> AsyncIterator[bytes]:
        for index in range(5):
            yield f"data: {index}\n\n".encode()

    async def send(message: Message) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            await asyncio.sleep(0.05)  # each send takes a quarter of the timeout
        sent.append(message.get("body", b""))

    async def run() -> None:
        response = StreamResponse(events(), sep="\n", ping=0, send_timeout=0.2)
        await response(SCOPE, _never_disconnects, send)

    asyncio.run(asyncio.wait_for(run(), timeout=10))
    assert [body for body in sent if body] == [f"data: {i}\n\n".encode() for i in range(5)]
