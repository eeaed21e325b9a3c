"""The run's global arrival schedule: every stage's offsets, shifted to run time, numbered.

Each stage draws from its own generator, ``default_rng([seed, stage.index])``, so a run is
reproducible from one integer, every worker can rebuild the identical global schedule without
any message from the master, and editing one stage of a shape does not reshuffle the others.
An arrival's position in the global schedule (``index``) is its identity: the worker split,
request ids and drop accounting all refer to it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ramplab.errors import UsageError
from ramplab.load.arrivals.base import ArrivalProcess
from ramplab.load.arrivals.constant import ConstantArrivals
from ramplab.load.arrivals.gamma import GammaArrivals
from ramplab.load.arrivals.poisson import PoissonArrivals
from ramplab.load.arrivals.trace import TraceArrivals
from ramplab.load.shapes import Shape


@dataclass(frozen=True, slots=True)
class Schedule:
    """Sorted run offsets (seconds from the run start) and the stage of each arrival."""

    offsets: NDArray[np.float64]
    stages: NDArray[np.intp]

    def __len__(self) -> int:
        return len(self.offsets)

    def counts_per_stage(self, n_stages: int) -> NDArray[np.intp]:
        return np.bincount(self.stages, minlength=n_stages).astype(np.intp)


def build_schedule(shape: Shape, process: ArrivalProcess, seed: int) -> Schedule:
    """The global schedule of ``shape`` under ``process``, reproducible from ``seed``."""
    if isinstance(process, TraceArrivals):  # the trace is the whole run's timeline, not a stage's
        offsets = process.schedule_offsets(shape)
        return Schedule(offsets, shape.stage_indices(offsets))
    parts: list[NDArray[np.float64]] = []
    stages: list[NDArray[np.intp]] = []
    for st in shape.stages:
        rng = np.random.default_rng([seed, st.index])
        rel = process.offsets(st.rate, st.duration_s, rng)
        parts.append(st.start_s + rel)
        stages.append(np.full(len(rel), st.index, dtype=np.intp))
    return Schedule(
        np.concatenate(parts) if parts else np.empty(0),
        np.concatenate(stages) if stages else np.empty(0, dtype=np.intp),
    )


def make_process(spec: str, field: str = "arrivals") -> ArrivalProcess:
    """``"constant"``, ``"poisson"``, ``"gamma"`` (burstiness 1), ``"gamma:0.5"``, or a replayed
    trace, ``"trace:SPEED:LOOP:LIMIT:PATH"`` (``ramplab.load.trace.trace_spec`` writes it)."""
    if spec.startswith("trace:"):
        return TraceArrivals.from_spec(spec, field)
    name, _, arg = spec.strip().lower().partition(":")
    if name == "constant" and not arg:
        return ConstantArrivals()
    if name == "poisson" and not arg:
        return PoissonArrivals()
    if name == "gamma":
        try:
            burstiness = float(arg) if arg else 1.0
            return GammaArrivals(burstiness)
        except ValueError:
            raise UsageError(field, f"burstiness must be a number > 0, got {arg!r}") from None
    raise UsageError(field, f"unknown arrival process {spec!r} (constant, poisson, gamma[:B])")
