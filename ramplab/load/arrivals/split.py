"""The deterministic split of the global schedule across the live workers.

Every worker rebuilds the same global schedule from the run's seed and keeps its own share, so
the master only has to broadcast *membership*: a list of epochs, each "from run offset ``t``
on, these workers are live". Within an epoch, the arrivals are dealt round-robin in schedule
order over the epoch's workers sorted by id: the ``j``-th arrival of the epoch goes to worker
``j mod n``. Hence

- every arrival belongs to exactly one worker (the shares sum exactly to the schedule, with no
  duplicate), in every epoch;
- within an epoch each worker gets ``floor(m / n)`` or ``ceil(m / n)`` of its ``m`` arrivals,
  i.e. its exact share of the rate, and interleaved in time (not one worker taking the first
  half), so that each worker's share is itself an evenly thinned copy of the process;
- a membership change at ``t`` re-deals only the arrivals at or after ``t``.

Sorting the ids (rather than trusting the order they were listed in) means master and workers
agree on the deal without agreeing on a list order. The master must choose a change time in the
future of every worker's clock (e.g. now + one heartbeat): arrivals before it were already dealt
under the old epoch, and those owned by a worker that died are lost with it, by design — the
schedule does not rewrite the past.

``share_chunks`` deals the same shares from the streamed schedule, chunk by chunk: an arrival's
place in its epoch is its global index minus the number of arrivals before the epoch's start,
and that number is final by the time the stream reaches the epoch, because the schedule is
sorted.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ramplab.load.arrivals.schedule import ScheduleChunk

# A worker's arrivals from one chunk of the schedule: global indices and their run offsets.
ShareChunk = tuple[NDArray[np.intp], NDArray[np.float64]]


@dataclass(frozen=True, slots=True)
class Epoch:
    """From run offset ``start_s`` on (until the next epoch), ``workers`` share the schedule."""

    start_s: float
    workers: tuple[str, ...]

    def __init__(self, start_s: float, workers: Iterable[str]) -> None:
        ids = tuple(sorted(workers))
        if not ids:
            raise ValueError("an epoch needs at least one live worker")
        if len(set(ids)) != len(ids):
            raise ValueError(f"duplicate worker ids in {ids}")
        object.__setattr__(self, "start_s", float(start_s))
        object.__setattr__(self, "workers", ids)


def every_nth(n_arrivals: int, index: int, n_workers: int) -> NDArray[np.intp]:
    """Indices of worker ``index`` of ``n_workers`` when membership never changes."""
    if not 0 <= index < n_workers:
        raise ValueError(f"worker index {index} outside 0..{n_workers - 1}")
    return np.arange(index, n_arrivals, n_workers, dtype=np.intp)


def _epoch_starts(offsets: NDArray[np.float64], epochs: Sequence[Epoch]) -> list[float]:
    """The epochs' start times, checked against each other and the schedule's first arrival."""
    if not epochs:
        raise ValueError("at least one epoch is needed")
    starts = [e.start_s for e in epochs]
    if any(b <= a for a, b in itertools.pairwise(starts)):
        raise ValueError(f"epoch start times must increase strictly, got {starts}")
    if len(offsets) and offsets[0] < starts[0]:
        raise ValueError(f"arrival at {offsets[0]}s precedes the first epoch ({starts[0]}s)")
    return starts


def _epoch_bounds(offsets: NDArray[np.float64], epochs: Sequence[Epoch]) -> list[tuple[int, int]]:
    """[first, last) arrival indices of each epoch."""
    starts = _epoch_starts(offsets, epochs)
    cuts = np.searchsorted(offsets, np.array(starts), side="left").tolist()
    cuts.append(len(offsets))
    return [(int(cuts[k]), int(cuts[k + 1])) for k in range(len(epochs))]


def worker_share(offsets: ArrayLike, epochs: Sequence[Epoch], worker: str) -> NDArray[np.intp]:
    """Global indices (into the sorted schedule ``offsets``) of the arrivals ``worker`` owns."""
    t = np.asarray(offsets, dtype=np.float64)
    parts: list[NDArray[np.intp]] = []
    for epoch, (lo, hi) in zip(epochs, _epoch_bounds(t, epochs), strict=True):
        if worker in epoch.workers:
            j = epoch.workers.index(worker)
            parts.append(np.arange(lo + j, hi, len(epoch.workers), dtype=np.intp))
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.intp)


def share_chunks(
    chunks: Iterable[ScheduleChunk], epochs: Sequence[Epoch], worker: str
) -> Iterator[ShareChunk]:
    """``worker_share`` of the streamed schedule: per chunk, the arrivals ``worker`` owns
    (possibly none), with their offsets."""
    starts: NDArray[np.float64] | None = None
    before = np.zeros(len(epochs), dtype=np.int64)  # arrivals so far ahead of each epoch start
    for chunk in chunks:
        offsets = chunk.offsets
        if starts is None:
            starts = np.array(_epoch_starts(offsets, epochs), dtype=np.float64)
        cuts = np.searchsorted(offsets, starts, side="left")
        before += cuts
        bounds = [*cuts.tolist(), len(offsets)]
        parts: list[NDArray[np.intp]] = []
        for k, epoch in enumerate(epochs):
            lo, hi = int(bounds[k]), int(bounds[k + 1])
            if lo < hi and worker in epoch.workers:
                n, j = len(epoch.workers), epoch.workers.index(worker)
                place = chunk.first + lo - int(before[k])  # of chunk position lo in its epoch
                parts.append(np.arange(lo + (j - place) % n, hi, n, dtype=np.intp))
        positions = np.concatenate(parts) if parts else np.empty(0, dtype=np.intp)
        yield chunk.first + positions, offsets[positions]


def split_schedule(offsets: ArrayLike, epochs: Sequence[Epoch]) -> dict[str, NDArray[np.intp]]:
    """Every worker's share (global indices), for the master's bookkeeping and for tests."""
    everyone = sorted({w for e in epochs for w in e.workers})
    return {w: worker_share(offsets, epochs, w) for w in everyone}
