"""The schedule as ramplab built it before it streamed (issue 24, part 4), frozen.

Every process built the whole global schedule in memory, then a worker took its share with
``worker_share``. Kept as the reference the streaming schedule must equal arrival for arrival
(``tests/ramplab/load/test_schedule_stream.py``) and as the baseline ``bench/schedule_memory.py``
measures it against; not used by ramplab itself.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from ramplab.load.arrivals import ConstantArrivals, GammaArrivals, PoissonArrivals
from ramplab.load.arrivals.base import ArrivalProcess
from ramplab.load.arrivals.trace import TraceArrivals
from ramplab.load.shapes import Shape

Draw = Callable[[np.random.Generator, int], NDArray[np.float64]]


def _renewal(
    draw: Draw, rate: float, duration_s: float, rng: np.random.Generator
) -> NDArray[np.float64]:
    expected = rate * duration_s
    batch = int(expected + 6 * np.sqrt(expected) + 16)
    gaps = draw(rng, batch)
    times = np.cumsum(gaps)
    while times[-1] < duration_s:
        more = np.cumsum(draw(rng, batch)) + times[-1]
        times = np.concatenate([times, more])
    return times[times < duration_s]


def _stage_offsets(
    process: ArrivalProcess, rate: float, duration_s: float, rng: np.random.Generator
) -> NDArray[np.float64]:
    if rate == 0 or duration_s == 0:
        return np.empty(0, dtype=np.float64)
    if isinstance(process, ConstantArrivals):
        return np.arange(np.ceil(rate * duration_s - 1e-9), dtype=np.float64) / rate
    if isinstance(process, PoissonArrivals):
        return _renewal(lambda g, n: g.exponential(1.0 / rate, n), rate, duration_s, rng)
    if isinstance(process, GammaArrivals):
        k = process.burstiness
        scale = 1.0 / (rate * k)
        return _renewal(lambda g, n: g.gamma(k, scale, n), rate, duration_s, rng)
    raise TypeError(f"no eager form for {process.name!r}")


def eager_schedule(shape: Shape, process: ArrivalProcess, seed: int) -> NDArray[np.float64]:
    """The global schedule's offsets, built whole (the old ``build_schedule``)."""
    if isinstance(process, TraceArrivals):
        return process.trace.offsets[process.trace.offsets < shape.duration_s].copy()
    parts = [
        st.start_s
        + _stage_offsets(process, st.rate, st.duration_s, np.random.default_rng([seed, st.index]))
        for st in shape.stages
    ]
    return np.concatenate(parts) if parts else np.empty(0)
