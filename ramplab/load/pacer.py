"""One worker's pacer: hands each arrival of its share to a free user at the arrival's due time.

Open loop means the schedule never waits for the server: at ``start + offset`` the arrival is
offered to ``try_dispatch`` (on a worker: a parked user, else a user started for it, below the
cap: ``ramplab/plugin/ondemand.py``); if it refuses, the arrival is **dropped and counted** (k6's
``dropped_iterations``) — or, with ``overflow="queue"``, held in a FIFO and dispatched when a
user frees up, its lateness recorded. Either way nothing is hidden: a dropped arrival is in
``dropped_indices``, a late one carries its intended time to the user, who measures latency
from it (coordinated omission stays visible).

Why the pacer sleeps *until* a due time and re-reads the clock instead of sleeping a gap:
each wake-up is late by the timer's resolution plus scheduling noise; with absolute due times
that error stays per-arrival and the pacer catches up after a stall (several arrivals due at
once are dispatched back to back), whereas relative sleeps add the errors up and the achieved
rate drifts below the target (vllm #21104).

Clock, sleep and dispatch are passed in: under gevent they are ``time.monotonic``,
``gevent.sleep`` and a callback that starts a greenlet on a free user; in tests a fake clock
whose ``sleep`` advances it. Sleeps are bounded by ``max_sleep_s`` so ``stop()`` and
``resplit()`` take effect promptly without needing a wake-up event.

The share comes as a stream of chunks (``ramplab.load.arrivals.split.share_chunks``) that the
pacer reads one at a time as the clock reaches them: a worker holds one chunk of its share as
Python numbers, not the share of a 10 h run.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

Clock = Callable[[], float]
Sleep = Callable[[float], object]
Overflow = Literal["drop", "queue"]
# Arrivals of a share: global indices and their run offsets, both sorted.
Chunk = tuple[ArrayLike, ArrayLike]


@dataclass(frozen=True, slots=True)
class Arrival:
    """One scheduled arrival as handed to a user."""

    index: int  # position in the global schedule (the arrival's identity)
    offset_s: float  # seconds from the run start
    intended: float  # due time on the pacer's clock (start + offset_s)


@dataclass(slots=True)
class PacerStats:
    """Counts, and with ``detail`` every dispatched arrival's lateness and every dropped
    arrival: for tests and short runs — a worker keeps only the counts (a ten-hour run at
    1,000 QPS would hold 18 million floats), and learns of each drop from ``on_drop``."""

    detail: bool = False
    dispatched: int = 0
    dropped: int = 0
    max_queue: int = 0
    dropped_indices: list[int] = field(default_factory=list)
    # clock() at dispatch − intended, per dispatched arrival, in dispatch order
    lateness_s: list[float] = field(default_factory=list)

    def lateness(self) -> NDArray[np.float64]:
        return np.asarray(self.lateness_s, dtype=np.float64)


class Pacer:
    """Dispatches a share's arrivals (``share``: chunks of global indices and run offsets, in
    order) at ``start`` + offset on ``clock``."""

    def __init__(
        self,
        share: Iterable[Chunk],
        *,
        start: float,
        clock: Clock,
        sleep: Sleep,
        try_dispatch: Callable[[Arrival], bool],
        overflow: Overflow = "drop",
        max_queue: int | None = None,
        poll_s: float = 0.001,
        max_sleep_s: float = 0.1,
        detail: bool = True,
        on_drop: Callable[[Arrival], None] | None = None,
    ) -> None:
        if overflow not in ("drop", "queue"):
            raise ValueError(f"overflow must be 'drop' or 'queue', got {overflow!r}")
        self.start = start
        self._clock = clock
        self._sleep = sleep
        self._try = try_dispatch
        self.overflow: Overflow = overflow
        self.max_queue = max_queue
        self.poll_s = poll_s
        self.max_sleep_s = max_sleep_s
        self.stats = PacerStats(detail=detail)
        self._on_drop = on_drop
        self._queue: deque[Arrival] = deque()
        self._stopped = False
        self._last_index = -1  # of the last arrival read from the share
        self._last_offset = -np.inf
        self._set_pending(share)

    def _set_pending(self, share: Iterable[Chunk]) -> None:
        self._share: Iterator[Chunk] = iter(share)
        self._indices: list[int] = []
        self._offsets: list[float] = []
        self._cursor = 0
        self._refill()

    def _refill(self) -> None:
        """Read the share's next non-empty chunk once the one at hand is used up, so that the
        one at hand is empty only when the share is."""
        while self._cursor >= len(self._offsets):
            chunk = next(self._share, None)
            if chunk is None:
                self._indices, self._offsets, self._cursor = [], [], 0
                return
            idx = np.asarray(chunk[0], dtype=np.int64)
            off = np.asarray(chunk[1], dtype=np.float64)
            if idx.shape != off.shape:
                raise ValueError(f"{len(idx)} indices for {len(off)} offsets")
            if off.size and (np.any(np.diff(off) < 0) or off[0] < self._last_offset):
                raise ValueError("offsets must be sorted")
            if off.size:
                self._last_index, self._last_offset = int(idx[-1]), float(off[-1])
            self._indices, self._offsets, self._cursor = idx.tolist(), off.tolist(), 0

    @property
    def pending(self) -> int:
        """Arrivals not yet due in the chunk at hand (the queue excluded): 0 when none remain."""
        return len(self._offsets) - self._cursor

    @property
    def queued(self) -> int:
        return len(self._queue)

    def resplit(self, share: Iterable[Chunk], change_s: float) -> None:
        """Membership changed at run offset ``change_s``: from then on, pace this new share.

        Pending arrivals before ``change_s`` are kept (they were dealt under the old epoch);
        those at or after it are replaced by the given ones at or after it, so passing the
        worker's whole new share (``share_chunks`` with the new epoch list) is correct. Before
        ``change_s`` the new share is the old one (the epochs before it are unchanged), so what
        was not read from the old share yet is read from the new one: the arrivals after the
        last one read, and those at or after ``change_s``.
        """
        old_idx = np.asarray(self._indices[self._cursor :], dtype=np.int64)
        old_off = np.asarray(self._offsets[self._cursor :], dtype=np.float64)
        keep = old_off < change_s
        read_up_to = self._last_index
        self._last_offset = -np.inf

        def rest() -> Iterator[Chunk]:
            yield old_idx[keep], old_off[keep]
            for indices, offsets in share:
                idx = np.asarray(indices, dtype=np.int64)
                off = np.asarray(offsets, dtype=np.float64)
                take = (off >= change_s) | (idx > read_up_to)
                yield idx[take], off[take]

        self._set_pending(rest())

    def stop(self) -> None:
        """Stop at the next wake-up; arrivals still pending or queued are not dispatched."""
        self._stopped = True

    def _offer(self, arrival: Arrival) -> bool:
        if self._try(arrival):
            self.stats.dispatched += 1
            if self.stats.detail:
                self.stats.lateness_s.append(self._clock() - arrival.intended)
            return True
        return False

    def _drop(self, arrival: Arrival) -> None:
        self.stats.dropped += 1
        if self.stats.detail:
            self.stats.dropped_indices.append(arrival.index)
        if self._on_drop is not None:
            self._on_drop(arrival)

    def _drain(self) -> None:
        while self._queue and self._offer(self._queue[0]):
            self._queue.popleft()

    def step(self) -> float | None:
        """Dispatch everything due now; return seconds until the next wake-up, None when done."""
        now = self._clock()
        self._drain()
        while self._cursor < len(self._offsets):
            offset = self._offsets[self._cursor]
            due = self.start + offset
            if due > now:
                break
            arrival = Arrival(self._indices[self._cursor], offset, due)
            self._cursor += 1
            self._refill()
            if self.overflow == "queue":
                if self._queue or not self._offer(arrival):
                    if self.max_queue is not None and len(self._queue) >= self.max_queue:
                        self._drop(arrival)
                    else:
                        self._queue.append(arrival)
                        self.stats.max_queue = max(self.stats.max_queue, len(self._queue))
            elif not self._offer(arrival):
                self._drop(arrival)
        if self._cursor >= len(self._offsets) and not self._queue:
            return None
        wait = self.max_sleep_s
        if self._cursor < len(self._offsets):
            wait = min(wait, self.start + self._offsets[self._cursor] - self._clock())
        if self._queue:
            wait = min(wait, self.poll_s)
        return max(wait, 0.0)

    def run(self) -> PacerStats:
        """Pace until every arrival is dispatched or dropped (queue drained), or ``stop()``."""
        while not self._stopped:
            wait = self.step()
            if wait is None:
                break
            if wait > 0:
                self._sleep(wait)
        return self.stats
