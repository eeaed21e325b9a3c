"""Constant spacing: arrivals at ``k / rate`` for every ``k`` with ``k / rate < duration``.

The first arrival is at the stage start, so a stage of ``rate × duration`` arrivals (an
integer) gets exactly that many; otherwise ``ceil(rate × duration)``. The rng is ignored: the
schedule is deterministic, which makes it the reference for rate-precision benchmarks.
"""

from __future__ import annotations

import math

import numpy as np

from ramplab.load.arrivals.base import Offsets, check_args


class ConstantArrivals:
    """Evenly spaced arrivals."""

    name = "constant"

    def offsets(self, rate: float, duration_s: float, rng: np.random.Generator) -> Offsets:
        check_args(rate, duration_s)
        if rate == 0 or duration_s == 0:
            return np.empty(0, dtype=np.float64)
        # The small tolerance keeps k/rate == duration (float noise) out of the stage.
        count = math.ceil(rate * duration_s - 1e-9)
        return np.arange(count, dtype=np.float64) / rate
