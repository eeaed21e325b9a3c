"""sse-starlette's ``EventSourceResponse`` with its send timeout kept by one timer per stream.

sse-starlette bounds every send with its own anyio cancel scope (``move_on_after``): at chunk
size 1 that scope is entered and left once per token, and under ``bench/target_stream.py``'s
load cProfile put it at more than the target's whole generator loop (3.2 s against 1.9 s of a
12.5 s profile). Here a
send only notes when it started; one loop timer per stream looks at the notes when the oldest
send in flight would reach ``send_timeout`` and cancels the task of any send that has. The
outcome is sse-starlette's: the send stops at the timeout and ``SendTimeoutError`` ends the
response (the generator sees ``GeneratorExit``, counted as ``send_failed``).

It overrides ``_send_with_timeout``, a private method of sse-starlette (3.7, pinned below 4 in
``pyproject.toml``); ``tests/target/test_sse.py`` and ``test_scheduler.py`` (end to end) check
the cut-off.
"""

from __future__ import annotations

import asyncio

from sse_starlette import EventSourceResponse
from sse_starlette.sse import SendTimeoutError
from starlette.types import Message, Receive, Scope, Send


class StreamResponse(EventSourceResponse):
    _watchdog: asyncio.TimerHandle | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Sends in flight (several tasks send: the stream, the pings, the closing message) and
        # the tasks the watchdog cancelled.
        self._in_flight: dict[asyncio.Task[object], float] = {}
        self._expired: set[asyncio.Task[object]] = set()
        try:
            await super().__call__(scope, receive, send)
        finally:
            if self._watchdog is not None:
                self._watchdog.cancel()

    async def _send_with_timeout(self, send: Send, message: Message) -> None:
        task = asyncio.current_task()
        if self.send_timeout is None or task is None:
            await super()._send_with_timeout(send, message)
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self._watchdog is None:
            self._watchdog = loop.call_at(now + self.send_timeout, self._check, loop)
        self._in_flight[task] = now
        try:
            await send(message)
        except asyncio.CancelledError:
            self._send_interrupted = True
            if task in self._expired:
                # Our own cancellation, not the server's: undo it and end as sse-starlette does.
                self._expired.discard(task)
                task.uncancel()
                raise SendTimeoutError() from None
            raise
        except BaseException:
            self._send_interrupted = True
            raise
        finally:
            self._in_flight.pop(task, None)

    def _check(self, loop: asyncio.AbstractEventLoop) -> None:
        assert self.send_timeout is not None
        now = loop.time()
        oldest = now
        for task, since in list(self._in_flight.items()):
            if now - since >= self.send_timeout:
                del self._in_flight[task]
                self._expired.add(task)
                task.cancel()
            else:
                oldest = min(oldest, since)
        # Next look: when the oldest send in flight (or the next one, at the earliest) is due.
        self._watchdog = loop.call_at(oldest + self.send_timeout, self._check, loop)
