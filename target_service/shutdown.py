"""Streams in flight when the target is told to stop (SIGTERM).

uvicorn stops accepting connections, then waits up to ``GRACEFUL_SHUTDOWN_S`` for the responses
in flight before it cancels them. sse-starlette, left to its defaults, cancels every SSE stream
as soon as it sees the shutdown: a client would get a stream cut without ``data: [DONE]`` and
without a word of why. Instead each stream gets a ``shutdown_event`` (sse-starlette sets it
when it detects the shutdown, polling every 0.5 s) and the generator, on seeing it, keeps
streaming for ``STREAM_GRACE_S``; a stream that would end later stops at that deadline with an
OpenAI-style error event (``code: server_shutdown``) and ``data: [DONE]``, so every stream ends
with one or the other. The three bounds nest: the generator's deadline (detection + 3 s) comes
before sse-starlette's forced cancel (detection + ``SSE_GRACE_S``), which comes before uvicorn's
(signal + ``GRACEFUL_SHUTDOWN_S``).
"""

from __future__ import annotations

GRACEFUL_SHUTDOWN_S = 5  # uvicorn's timeout_graceful_shutdown
SSE_GRACE_S = 4.0  # sse-starlette's shutdown_grace_period: its forced cancel, a backstop
STREAM_GRACE_S = 3.0  # how long a stream may go on after the generator sees the shutdown
SHUTDOWN_CODE = "server_shutdown"
SHUTDOWN_MESSAGE = "The server is shutting down; the response was cut short. Retry the request."
