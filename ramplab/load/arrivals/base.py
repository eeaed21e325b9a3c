"""The arrival-process protocol: when, within one constant-rate stage, requests should start.

A process returns **absolute offsets from the stage start**, sorted, all in ``[0, duration)``,
never relative sleeps: a pacer that sleeps "the gap to the next arrival" accumulates every
wake-up's lateness (vLLM delivered 183.5 QPS for a 200 QPS target that way, vllm #21104),
while one that sleeps until ``start + offset`` is late per arrival but never drifts.

The random generator is passed in, never global, so that every worker can rebuild the *same*
global schedule from the run's seed and take its own share of it (``ramplab.load.arrivals.split``).

Offsets come in chunks (``chunks``), so that no process ever holds a whole stage: a 10 h stage
at 1,000 QPS is 36 M offsets, 288 MB as one array. The chunking is invisible in the result: the
chunks concatenated are, bit for bit, the offsets drawn in one go (``renewal_chunks`` says how).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

Offsets = NDArray[np.float64]

# Offsets per chunk: 512 KiB of float64, a few milliseconds of drawing at most.
CHUNK = 65_536

# Draws ``size`` i.i.d. gaps from the generator.
_Draw = Callable[[np.random.Generator, int], NDArray[np.float64]]


class ArrivalProcess(Protocol):
    """Generates one stage's arrival offsets."""

    name: str

    def chunks(
        self, rate: float, duration_s: float, rng: np.random.Generator, size: int = CHUNK
    ) -> Iterator[Offsets]:
        """The stage's sorted offsets (seconds from the stage start) in ``[0, duration_s)`` at
        mean ``rate``, in consecutive non-empty chunks of at most ``size``."""
        ...

    def offsets(self, rate: float, duration_s: float, rng: np.random.Generator) -> Offsets:
        """Every offset of ``chunks`` in one array."""
        ...


def gather(chunks: Iterable[Offsets]) -> Offsets:
    """Chunks of offsets as one array."""
    parts = list(chunks)
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.float64)


def check_args(rate: float, duration_s: float) -> None:
    """Shared argument validation (programming errors, not user input: shapes validate that)."""
    if not (rate >= 0 and np.isfinite(rate)):
        raise ValueError(f"rate must be finite and ≥ 0, got {rate}")
    if not (duration_s >= 0 and np.isfinite(duration_s)):
        raise ValueError(f"duration_s must be finite and ≥ 0, got {duration_s}")


def renewal_chunks(
    draw: _Draw, rate: float, duration_s: float, rng: np.random.Generator, size: int = CHUNK
) -> Iterator[Offsets]:
    """Cumulative sums of i.i.d. gaps (mean ``1/rate``) that fall inside the stage, in chunks.

    The gaps are drawn in batches sized from the expected count, extending until the stage is
    covered, and each batch is summed from zero then shifted by the previous batch's last time.
    Both are kept from the eager form this replaced, because its float sums (not only its
    distribution) are what reproducibility promises: the same seed, the same offsets. Within a
    batch the chunks continue one sequential sum (the running total is added to a chunk's first
    gap before ``cumsum``, which is exactly the addition an unbroken ``cumsum`` would do), and
    the generator draws gap after gap whatever the request size, so chunking changes nothing.
    Drawing stops at the first time past the stage, mid-batch: the stage's generator is its own
    (``schedule.py``), so the draws left out would have been thrown away anyway.
    """
    expected = rate * duration_s
    batch = int(expected + 6 * np.sqrt(expected) + 16)
    batch_base: float | None = None  # None in the first batch, which is not shifted
    while True:
        running = 0.0
        drawn = 0
        times = np.empty(0, dtype=np.float64)
        while drawn < batch:
            gaps = draw(rng, min(size, batch - drawn))
            if drawn:
                gaps[0] += running
            sums = np.cumsum(gaps)
            running = float(sums[-1])
            drawn += len(gaps)
            times = sums if batch_base is None else sums + batch_base
            if times[-1] >= duration_s:
                inside = times[times < duration_s]
                if len(inside):
                    yield inside
                return
            yield times
        batch_base = float(times[-1])
