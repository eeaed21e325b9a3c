"""The target's clock: ``perf_counter`` time, and sleeping until an absolute deadline exactly.

Why not ``loop.time()`` and ``asyncio.sleep(delay)``: uvloop's loop clock is libuv's, in whole
milliseconds and cached per loop iteration, and both uvloop and the stdlib loop wait for their
timers in ``epoll_wait``, whose timeout is whole milliseconds too. A paced stream at ITL 2.5 ms
then leaves the target in gaps of ~2.1 and ~3.1 ms, never 2.5, and its TTFT/ITL histograms sit on
a 1 ms grid: too coarse for the reference that load generators measure themselves against.

:class:`PreciseClock` (Linux) keeps one ``timerfd`` per process on ``CLOCK_MONOTONIC`` — the clock
behind ``time.perf_counter`` — armed at the earliest pending deadline and watched by the event
loop like any socket: the kernel wakes the loop at that instant (nanosecond resolution, within the
kernel's timer slack of ~50 µs), nothing spins, and one file descriptor serves every stream.
Deadlines stay absolute, so however late one wake-up is, nothing drifts. Where ``timerfd`` is
missing, :class:`LoopClock` sleeps the remaining delta with ``asyncio.sleep`` (never early, up to
a millisecond late). Both read ``perf_counter``; :func:`default_clock` picks one.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import heapq
import itertools
import os
import sys
import time
from typing import Protocol

_CLOCK_MONOTONIC = 1
_TFD_TIMER_ABSTIME = 1


class Clock(Protocol):
    """What the target paces and measures with; tests may pass their own."""

    def now(self) -> float:
        """Seconds on a monotonic clock (``perf_counter``'s)."""
        ...

    async def sleep_until(self, deadline: float) -> None:
        """Return at ``deadline`` (a :meth:`now` value), never before; at once if it passed."""
        ...

    def close(self) -> None:
        """Release what the clock holds (the process is shutting down)."""
        ...


class LoopClock:
    """``perf_counter`` time, waits by ``asyncio.sleep``: never early, up to ~1 ms late."""

    def now(self) -> float:
        return time.perf_counter()

    async def sleep_until(self, deadline: float) -> None:
        # The loop rounds a delay to whole ms against a cached time, so it may wake early: the
        # remainder (under 1 ms) is slept again, which uvloop turns into a few bare yields.
        while (delay := deadline - time.perf_counter()) > 0:  # noqa: ASYNC110 (a deadline)
            await asyncio.sleep(delay)

    def close(self) -> None:
        pass


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


class PreciseClock:
    """Deadlines kept in a heap; one ``timerfd`` armed at the earliest, read by the event loop.

    Bound to the loop that first sleeps on it; :meth:`close` releases the descriptor.
    """

    def __init__(self) -> None:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self._settime = libc.timerfd_settime
        self._fd: int = libc.timerfd_create(_CLOCK_MONOTONIC, os.O_NONBLOCK | os.O_CLOEXEC)
        if self._fd < 0:
            raise OSError(ctypes.get_errno(), "timerfd_create failed")
        self._heap: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()  # ties keep arrival order; futures never get compared
        self._loop: asyncio.AbstractEventLoop | None = None
        self._armed = float("inf")

    def now(self) -> float:
        return time.perf_counter()

    async def sleep_until(self, deadline: float) -> None:
        if deadline <= time.perf_counter():
            return
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._bind(loop)
        waiter: asyncio.Future[None] = loop.create_future()
        heapq.heappush(self._heap, (deadline, next(self._order), waiter))
        if deadline < self._armed:
            self._arm(deadline)
        # A cancelled waiter stays in the heap and is skipped when it comes due.
        await waiter

    def close(self) -> None:
        if self._fd < 0:
            return
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._fd)
        os.close(self._fd)
        self._fd = -1

    def _bind(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._fd)
        self._loop = loop
        self._heap.clear()
        self._armed = float("inf")
        loop.add_reader(self._fd, self._fire)

    def _arm(self, deadline: float) -> None:
        seconds = int(deadline)
        nanos = int((deadline - seconds) * 1e9)
        spec = _Itimerspec(_Timespec(0, 0), _Timespec(seconds, nanos))
        if self._settime(self._fd, _TFD_TIMER_ABSTIME, ctypes.byref(spec), None) != 0:
            raise OSError(ctypes.get_errno(), "timerfd_settime failed")
        self._armed = deadline

    def _fire(self) -> None:
        # Nothing to read when it was re-armed after expiring: the heap says what is due.
        with contextlib.suppress(BlockingIOError):
            os.read(self._fd, 8)
        now = time.perf_counter()
        heap = self._heap
        while heap and heap[0][0] <= now:
            waiter = heapq.heappop(heap)[2]
            if not waiter.done():
                waiter.set_result(None)
        self._armed = float("inf")
        if heap:
            self._arm(heap[0][0])


def default_clock() -> Clock:
    """:class:`PreciseClock` where ``timerfd`` shares ``perf_counter``'s clock, else
    :class:`LoopClock`."""
    info = time.get_clock_info("perf_counter")
    if sys.platform.startswith("linux") and info.implementation == "clock_gettime(CLOCK_MONOTONIC)":
        try:
            return PreciseClock()
        except (OSError, AttributeError):
            pass  # no timerfd in this libc (e.g. a sandbox): fall back to the loop's timers
    return LoopClock()
