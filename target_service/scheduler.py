"""Admission of sequences onto the simulated engine.

Two kinds, chosen by ``scheduler.kind``:

* ``continuous`` — up to ``max_num_seqs`` sequences run at once; a waiting request joins as soon as
  any slot frees (vLLM-style continuous batching).
* ``static`` — sequences run in batches: a batch forms when the engine is idle, stays open for
  ``batch_window_ms``, then runs until *every* member has finished; requests arriving meanwhile wait
  for the whole batch, so a short request waits behind the longest one in front of it. This is the
  "batch scheduler not aligned to token lengths" of the study's §4.1.

Both keep a bounded FIFO of waiting requests: when it is full, or a request has waited
``queue_timeout_s``, admission fails with ``QueueFull`` (the app answers 503 with ``Retry-After``).
A cancelled waiter (the client went away) leaves the queue at once and never takes a slot.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable
from typing import Literal

from target_service.errors import QueueFull

Observer = Callable[[int, int], None]  # (running, waiting) after every change


class Slot:
    """A sequence's place on the engine; releasing it twice is harmless."""

    __slots__ = ("_released", "_scheduler")

    def __init__(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler
        self._released = False

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._scheduler._on_release()


class Scheduler:
    """Base: the bounded waiting queue shared by both kinds."""

    def __init__(
        self,
        max_num_seqs: int,
        max_waiting: int,
        queue_timeout_s: float,
        observer: Observer | None = None,
    ) -> None:
        self.max_num_seqs = max_num_seqs
        self.max_waiting = max_waiting
        self.queue_timeout_s = queue_timeout_s
        self.running = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._observer = observer

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    async def admit(self) -> Slot:
        """Wait for a slot; raises ``QueueFull`` when the queue is full or patience runs out."""
        if self._try_start():
            self._notify()
            return Slot(self)
        if len(self._waiters) >= self.max_waiting:
            raise QueueFull("queue_full")
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        self._notify()
        try:
            await asyncio.wait_for(asyncio.shield(waiter), self.queue_timeout_s)
        except (TimeoutError, asyncio.CancelledError) as exc:
            if waiter.done() and not waiter.cancelled():
                # Granted in the same instant we gave up: hand the slot straight back.
                self._on_release()
            else:
                waiter.cancel()
                self._forget(waiter)
            if isinstance(exc, TimeoutError):
                raise QueueFull("queue_timeout") from None
            raise
        return Slot(self)

    def _forget(self, waiter: asyncio.Future[None]) -> None:
        with contextlib.suppress(ValueError):
            self._waiters.remove(waiter)
        self._notify()

    def _grant_next(self) -> bool:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return True
        return False

    def _notify(self) -> None:
        if self._observer is not None:
            self._observer(self.running, len(self._waiters))

    def _try_start(self) -> bool:
        raise NotImplementedError

    def _on_release(self) -> None:
        raise NotImplementedError


class ContinuousScheduler(Scheduler):
    def _try_start(self) -> bool:
        if self.running < self.max_num_seqs and not self._waiters:
            self.running += 1
            return True
        return False

    def _on_release(self) -> None:
        self.running -= 1
        while self.running < self.max_num_seqs and self._grant_next():
            self.running += 1
        self._notify()


class StaticScheduler(Scheduler):
    def __init__(
        self,
        max_num_seqs: int,
        max_waiting: int,
        queue_timeout_s: float,
        batch_window_s: float,
        observer: Observer | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        super().__init__(max_num_seqs, max_waiting, queue_timeout_s, observer)
        self.batch_window_s = batch_window_s
        self._open_until = float("-inf")
        # perf_counter, not loop.time(): uvloop's loop clock is whole milliseconds.
        self._now = clock

    def _try_start(self) -> bool:
        if self.running == 0:
            self._open_until = self._now() + self.batch_window_s
        if self.running < self.max_num_seqs and self._now() <= self._open_until:
            self.running += 1
            return True
        return False

    def _on_release(self) -> None:
        self.running -= 1
        if self.running == 0:
            # The batch is over: the queue's head forms the next one, which stays open briefly.
            self._open_until = self._now() + self.batch_window_s
            while self.running < self.max_num_seqs and self._grant_next():
                self.running += 1
        self._notify()


def build_scheduler(
    kind: Literal["continuous", "static"],
    max_num_seqs: int,
    max_waiting: int,
    queue_timeout_s: float,
    batch_window_s: float,
    observer: Observer | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Scheduler:
    if kind == "static":
        return StaticScheduler(
            max_num_seqs, max_waiting, queue_timeout_s, batch_window_s, observer, clock
        )
    return ContinuousScheduler(max_num_seqs, max_waiting, queue_timeout_s, observer)
