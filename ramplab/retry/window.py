"""A sliding-window event counter on a clock passed in (budgets and throttles share it).

Timestamps are kept individually (a deque), not in buckets: the window is exact, which is what
the budget's bound is proved against, and memory stays at window × rate entries (10 s × a few
thousand requests per second per worker at most).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

Clock = Callable[[], float]


class SlidingCounter:
    """Counts events in the last ``window_s`` seconds of ``clock``."""

    def __init__(self, window_s: float, clock: Clock) -> None:
        if not window_s > 0:
            raise ValueError(f"window_s must be > 0, got {window_s}")
        self.window_s = window_s
        self._clock = clock
        self._times: deque[float] = deque()

    def add(self) -> None:
        now = self._clock()
        self._evict(now)
        self._times.append(now)

    def count(self) -> int:
        self._evict(self._clock())
        return len(self._times)

    def _evict(self, now: float) -> None:
        horizon = now - self.window_s
        times = self._times
        while times and times[0] <= horizon:
            times.popleft()
