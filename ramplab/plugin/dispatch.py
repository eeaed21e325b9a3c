"""Hands arrivals to idle users on one worker.

An idle user parks on a one-shot ``AsyncResult``; the pacer pops the one that parked last and
sets it, which wakes that user's greenlet. With no parked user the pacer is told so at once
(``False``) — it never waits, which is what keeps the load open — and the worker starts a user
for the arrival (``ondemand.py``) or, at its cap, counts it as dropped.

Last in, first out: the users the sizing's headroom adds beyond the streams in flight then stay
parked at the bottom of the stack and never open a connection or run the request path, so they
cost a parked greenlet each, and the busy users' connections are the ones most recently used
(least likely closed by the server's keep-alive timeout). Handing out the longest-idle user
instead rotated every arrival through all of them: each kept a connection open and the deepest
stack it ever ran (``bench/generator_load.py``).
"""

from __future__ import annotations

from collections import deque

from gevent.event import AsyncResult

from ramplab.load.pacer import Arrival


class Dispatcher:
    def __init__(self) -> None:
        self._idle: deque[AsyncResult] = deque()
        self.busy = 0
        self._closed = False

    @property
    def idle(self) -> int:
        return len(self._idle)

    def wait(self) -> Arrival | None:
        """Block the calling user until it is handed an arrival; ``None`` when the run ends."""
        if self._closed:
            return None
        slot: AsyncResult = AsyncResult()
        self._idle.append(slot)
        try:
            arrival: Arrival | None = slot.get()
        finally:
            if not slot.ready() and slot in self._idle:
                # Killed while parked (Locust stopping the user): never hand it an arrival.
                self._idle.remove(slot)
        return arrival

    def try_dispatch(self, arrival: Arrival) -> bool:
        if not self._idle:
            return False
        self.begin()
        self._idle.pop().set(arrival)
        return True

    def begin(self) -> None:
        """A user started a request (closed-loop users call this themselves)."""
        self.busy += 1

    def done(self) -> None:
        self.busy -= 1

    def close(self) -> None:
        """Release every parked user; later ``wait()`` calls return ``None`` at once."""
        self._closed = True
        while self._idle:
            self._idle.popleft().set(None)
