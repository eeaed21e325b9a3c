"""The arrival-process protocol: when, within one constant-rate stage, requests should start.

A process returns **absolute offsets from the stage start**, sorted, all in ``[0, duration)``,
never relative sleeps: a pacer that sleeps "the gap to the next arrival" accumulates every
wake-up's lateness (vLLM delivered 183.5 QPS for a 200 QPS target that way, vllm #21104),
while one that sleeps until ``start + offset`` is late per arrival but never drifts.

The random generator is passed in, never global, so that every worker can rebuild the *same*
global schedule from the run's seed and take its own share of it (``ramplab.load.arrivals.split``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

Offsets = NDArray[np.float64]


# Draws ``size`` i.i.d. gaps from the generator.
_Draw = Callable[[np.random.Generator, int], NDArray[np.float64]]


class ArrivalProcess(Protocol):
    """Generates one stage's arrival offsets."""

    name: str

    def offsets(self, rate: float, duration_s: float, rng: np.random.Generator) -> Offsets:
        """Sorted offsets (seconds from the stage start) in ``[0, duration_s)`` at mean ``rate``."""
        ...


def check_args(rate: float, duration_s: float) -> None:
    """Shared argument validation (programming errors, not user input: shapes validate that)."""
    if not (rate >= 0 and np.isfinite(rate)):
        raise ValueError(f"rate must be finite and ≥ 0, got {rate}")
    if not (duration_s >= 0 and np.isfinite(duration_s)):
        raise ValueError(f"duration_s must be finite and ≥ 0, got {duration_s}")


def renewal(draw: _Draw, rate: float, duration_s: float, rng: np.random.Generator) -> Offsets:
    """Cumulative sums of i.i.d. gaps (mean ``1/rate``) that fall inside the stage.

    Draws in vectorised batches sized from the expected count, extending until the stage is
    covered, so the result does not depend on the batch size in distribution.
    """
    expected = rate * duration_s
    batch = int(expected + 6 * np.sqrt(expected) + 16)
    gaps = draw(rng, batch)
    times = np.cumsum(gaps)
    while times[-1] < duration_s:
        more = np.cumsum(draw(rng, batch)) + times[-1]
        times = np.concatenate([times, more])
    return times[times < duration_s]
