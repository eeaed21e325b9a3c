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

import numpy as np
from numpy.typing import NDArray

from ramplab.load.arrivals.base import Offsets, check_args, renewal


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

    def offsets(self, rate: float, duration_s: float, rng: np.random.Generator) -> Offsets:
        check_args(rate, duration_s)
        if rate == 0 or duration_s == 0:
            return np.empty(0, dtype=np.float64)
        k = self.burstiness
        scale = 1.0 / (rate * k)

        def draw(g: np.random.Generator, size: int) -> NDArray[np.float64]:
            return g.gamma(k, scale, size)

        return renewal(draw, rate, duration_s, rng)
