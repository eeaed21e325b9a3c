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

Then the lifespan cancels its background tasks (key ring, usage flush, admin watch) and waits
for them at most ``TASKS_STOP_S``: a task that does not end is logged with the chain of awaits it
is stuck in, and the shutdown goes on without it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

GRACEFUL_SHUTDOWN_S = 5  # uvicorn's timeout_graceful_shutdown
SSE_GRACE_S = 4.0  # sse-starlette's shutdown_grace_period: its forced cancel, a backstop
STREAM_GRACE_S = 3.0  # how long a stream may go on after the generator sees the shutdown
SHUTDOWN_CODE = "server_shutdown"
SHUTDOWN_MESSAGE = "The server is shutting down; the response was cut short. Retry the request."
TASKS_STOP_S = 5.0  # the lifespan's wait for its cancelled background tasks

log = logging.getLogger("target_service")


def awaiting(task: asyncio.Task[Any]) -> str:
    """Where ``task`` is suspended, outermost first: ``function (file:line)`` down the chain of
    awaits (``Task.get_stack`` shows only the outermost coroutine)."""
    frames: list[str] = []
    node: Any = task.get_coro()
    while node is not None:
        frame = getattr(node, "cr_frame", None) or getattr(node, "ag_frame", None)
        if frame is None:
            frames.append(repr(node)[:120])  # a future or a C-level awaitable
            break
        code = frame.f_code
        frames.append(f"{code.co_name} ({code.co_filename}:{frame.f_lineno})")
        node = getattr(node, "cr_await", None) or getattr(node, "ag_await", None)
    return " -> ".join(frames)


async def stop_tasks(tasks: Sequence[asyncio.Task[Any]], timeout_s: float = TASKS_STOP_S) -> bool:
    """Cancel ``tasks`` and wait up to ``timeout_s`` for them to end; ``False`` (each one still
    running logged with where it waits) when some did not, so a shutdown can never hang on one."""
    for task in tasks:
        task.cancel()
    if not tasks:
        return True
    _, pending = await asyncio.wait(tasks, timeout=timeout_s)
    for task in pending:
        log.error(
            "shutdown: background task %s still running %.1f s after its cancel, waiting at %s;"
            " left behind",
            task.get_name(),
            timeout_s,
            awaiting(task),
        )
    return not pending
