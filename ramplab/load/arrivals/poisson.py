"""Poisson arrivals: exponential gaps of mean ``1 / rate`` (a memoryless, open-loop source).

Generated as a renewal process from the stage start rather than "draw N ~ Poisson, sort
uniforms": both give a Poisson process, the renewal form shares its code with the gamma process
so that ``GammaArrivals(burstiness=1)`` and ``PoissonArrivals`` draw the same distribution.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from numpy.typing import NDArray

from ramplab.load.arrivals.base import CHUNK, Offsets, check_args, gather, renewal_chunks


class PoissonArrivals:
    """Exponential inter-arrival gaps."""

    name = "poisson"

    def chunks(
        self, rate: float, duration_s: float, rng: np.random.Generator, size: int = CHUNK
    ) -> Iterator[Offsets]:
        check_args(rate, duration_s)
        if rate == 0 or duration_s == 0:
            return

        def draw(g: np.random.Generator, count: int) -> NDArray[np.float64]:
            return g.exponential(1.0 / rate, count)

        yield from renewal_chunks(draw, rate, duration_s, rng, size)

    def offsets(self, rate: float, duration_s: float, rng: np.random.Generator) -> Offsets:
        return gather(self.chunks(rate, duration_s, rng))
