"""Gamma arrivals with a burstiness factor, following vLLM ``bench serve``'s convention.

Gaps are ``Gamma(shape=burstiness, scale=1 / (rate × burstiness))``: the mean gap stays
``1 / rate`` whatever the burstiness, and the gaps' coefficient of variation is
``1 / sqrt(burstiness)``:

- ``burstiness = 1``: exponential gaps, i.e. a Poisson process (CV 1);
- ``burstiness < 1``: burstier than Poisson (CV > 1, clumps and silences);
- ``burstiness > 1``: more regular than Poisson (CV < 1), tending to constant spacing.

The process is a renewal process started at the stage start (not a stationary one), which only
matters for the first gap and only when burstiness ≠ 1.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
from numpy.typing import NDArray

from ramplab.load.arrivals.base import CHUNK, Offsets, check_args, gather, renewal_chunks


class GammaArrivals:
    """Gamma-distributed gaps; ``burstiness`` as in vLLM (1 = Poisson, < 1 burstier)."""

    name = "gamma"

    def __init__(self, burstiness: float = 1.0) -> None:
        if not (burstiness > 0 and math.isfinite(burstiness)):
            raise ValueError(f"burstiness must be finite and > 0, got {burstiness}")
        self.burstiness = burstiness

    @property
    def cv(self) -> float:
        """Coefficient of variation of the gaps: ``1 / sqrt(burstiness)``."""
        return 1.0 / math.sqrt(self.burstiness)

    def chunks(
        self, rate: float, duration_s: float, rng: np.random.Generator, size: int = CHUNK
    ) -> Iterator[Offsets]:
        check_args(rate, duration_s)
        if rate == 0 or duration_s == 0:
            return
        k = self.burstiness
        scale = 1.0 / (rate * k)

        def draw(g: np.random.Generator, count: int) -> NDArray[np.float64]:
            return g.gamma(k, scale, count)

        yield from renewal_chunks(draw, rate, duration_s, rng, size)

    def offsets(self, rate: float, duration_s: float, rng: np.random.Generator) -> Offsets:
        return gather(self.chunks(rate, duration_s, rng))
