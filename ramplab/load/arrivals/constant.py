"""Constant spacing: arrivals at ``k / rate`` for every ``k`` with ``k / rate < duration``.

The first arrival is at the stage start, so a stage of ``rate × duration`` arrivals (an
integer) gets exactly that many; otherwise ``ceil(rate × duration)``. The rng is ignored: the
schedule is deterministic, which makes it the reference for rate-precision benchmarks.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from ramplab.load.arrivals.base import CHUNK, Offsets, check_args, gather


class ConstantArrivals:
    """Evenly spaced arrivals."""

    name = "constant"

    def chunks(
        self, rate: float, duration_s: float, rng: np.random.Generator, size: int = CHUNK
    ) -> Iterator[Offsets]:
        check_args(rate, duration_s)
        if rate == 0 or duration_s == 0:
            return
        # The small tolerance keeps k/rate == duration (float noise) out of the stage.
        count = math.ceil(rate * duration_s - 1e-9)
        for first in range(0, count, size):
            yield np.arange(first, min(first + size, count), dtype=np.float64) / rate

    def offsets(self, rate: float, duration_s: float, rng: np.random.Generator) -> Offsets:
        return gather(self.chunks(rate, duration_s, rng))
