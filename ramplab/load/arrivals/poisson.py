"""Poisson arrivals: exponential gaps of mean ``1 / rate`` (a memoryless, open-loop source).

Generated as a renewal process from the stage start rather than "draw N ~ Poisson, sort
uniforms": both give a Poisson process, the renewal form shares its code with the gamma process
so that ``GammaArrivals(burstiness=1)`` and ``PoissonArrivals`` draw the same distribution.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from ramplab.load.arrivals.base import Offsets, check_args, renewal


class PoissonArrivals:
    """Exponential inter-arrival gaps."""

    name = "poisson"

    def offsets(self, rate: float, duration_s: float, rng: np.random.Generator) -> Offsets:
        check_args(rate, duration_s)
        if rate == 0 or duration_s == 0:
            return np.empty(0, dtype=np.float64)

        def draw(g: np.random.Generator, size: int) -> NDArray[np.float64]:
            return g.exponential(1.0 / rate, size)

        return renewal(draw, rate, duration_s, rng)
