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
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray


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


def _epoch_bounds(offsets: NDArray[np.float64], epochs: Sequence[Epoch]) -> list[tuple[int, int]]:
    """[first, last) arrival indices of each epoch."""
    if not epochs:
        raise ValueError("at least one epoch is needed")
    starts = [e.start_s for e in epochs]
    if any(b <= a for a, b in itertools.pairwise(starts)):
        raise ValueError(f"epoch start times must increase strictly, got {starts}")
    if len(offsets) and offsets[0] < starts[0]:
        raise ValueError(f"arrival at {offsets[0]}s precedes the first epoch ({starts[0]}s)")
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


def split_schedule(offsets: ArrayLike, epochs: Sequence[Epoch]) -> dict[str, NDArray[np.intp]]:
    """Every worker's share (global indices), for the master's bookkeeping and for tests."""
    everyone = sorted({w for e in epochs for w in e.workers})
    return {w: worker_share(offsets, epochs, w) for w in everyone}
