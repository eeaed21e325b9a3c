"""One clock per stamp: the monotonic clock, with the wall clock derived from it by an offset.

Every duration ramplab reports is a difference of monotonic readings (``time.perf_counter``).
Two things need the wall clock: a record's epoch fields (so that workers' records merge) and the
kernel's receive stamps (``SO_TIMESTAMPNS`` stamps packets with ``CLOCK_REALTIME``). Reading
both clocks one after the other at every stamp puts whatever happens between the two reads — a
preemption, a switch to another greenlet — into the stamp: single events moved 4–12 ms on a
starved machine. Here the offset between the two clocks is measured once per process by
bracketing (monotonic, wall, monotonic, the tightest of several tries) and then applied to every
stamp, so a stamp is one clock read. It is measured again every ``REFRESH_S`` (NTP may slew
the wall clock by up to 0.5 ms a second), keeping the old offset unless the new bracket is tight.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable

__all__ = ["Timebase", "process_timebase"]

Clock = Callable[[], float]

REFRESH_S = 10.0
TRIES = 25
TIGHT_S = 50e-6  # a bracket this narrow pins the offset to within half of it


class Timebase:
    """The wall clock as ``monotonic + offset``, the offset measured by bracketed reads."""

    def __init__(self, clock: Clock = time.perf_counter, wall: Clock = time.time) -> None:
        self.clock = clock
        self._wall = wall
        self._lock = threading.Lock()
        self.offset, self.bracket_s = self._measure()
        self._measured_at = clock()

    def _measure(self) -> tuple[float, float]:
        """``(offset, bracket)``: the tightest of ``TRIES`` reads of monotonic, wall, monotonic."""
        best_offset, best_bracket = 0.0, float("inf")
        clock, wall = self.clock, self._wall
        for _ in range(TRIES):
            before = clock()
            now = wall()
            after = clock()
            if after - before < best_bracket:
                best_offset, best_bracket = now - (before + after) / 2.0, after - before
        return best_offset, best_bracket

    def _refresh(self, now: float) -> None:
        with self._lock:
            if now - self._measured_at < REFRESH_S:
                return
            self._measured_at = now
            offset, bracket = self._measure()
            if bracket <= max(TIGHT_S, self.bracket_s):
                self.offset, self.bracket_s = offset, bracket

    def epoch(self, monotonic: float) -> float:
        """The wall-clock time (epoch seconds) of a monotonic reading."""
        if monotonic - self._measured_at >= REFRESH_S:
            self._refresh(monotonic)
        return monotonic + self.offset

    def monotonic(self, epoch: float) -> float:
        """The monotonic reading of a wall-clock time (a kernel stamp)."""
        return epoch - self.offset


@functools.cache
def process_timebase() -> Timebase:
    """The process's timebase on ``time.perf_counter``, made on first use."""
    return Timebase()
