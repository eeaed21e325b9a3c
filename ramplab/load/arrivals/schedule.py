"""The run's global arrival schedule: every stage's offsets, shifted to run time, numbered.

Each stage draws from its own generator, ``default_rng([seed, stage.index])``, so a run is
reproducible from one integer, every worker can rebuild the identical global schedule without
any message from the master, and editing one stage of a shape does not reshuffle the others.
An arrival's position in the global schedule (``index``) is its identity: the worker split,
request ids and drop accounting all refer to it.

The schedule is a stream (``schedule_chunks``): workers and master walk it chunk by chunk and
keep what they need (a share, counts), so a run's length costs them time, not memory.
``build_schedule`` gathers it whole, for tests and short runs.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ramplab.errors import UsageError
from ramplab.load.arrivals.base import CHUNK, ArrivalProcess
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


@dataclass(frozen=True, slots=True)
class ScheduleChunk:
    """Consecutive arrivals of the schedule: ``offsets[k]`` is arrival ``first + k``."""

    first: int
    offsets: NDArray[np.float64]
    stages: NDArray[np.intp]


def schedule_chunks(
    shape: Shape, process: ArrivalProcess, seed: int, size: int = CHUNK
) -> Iterator[ScheduleChunk]:
    """The global schedule of ``shape`` under ``process``, reproducible from ``seed``, in
    order, in non-empty chunks of at most ``size`` arrivals."""
    first = 0
    if isinstance(process, TraceArrivals):  # the trace is the whole run's timeline, not a stage's
        for offsets in process.schedule_chunks(shape, size):
            yield ScheduleChunk(first, offsets, shape.stage_indices(offsets))
            first += len(offsets)
        return
    for st in shape.stages:
        rng = np.random.default_rng([seed, st.index])
        for rel in process.chunks(st.rate, st.duration_s, rng, size):
            yield ScheduleChunk(first, st.start_s + rel, np.full(len(rel), st.index, np.intp))
            first += len(rel)


class StageBounds:
    """The stage of each arrival of a streamed schedule, learnt from the chunks seen so far.

    The schedule is sorted and its stages come in order, so each stage's first global index says
    it all: a few integers per run, where a stage per arrival would be the schedule over again.
    """

    def __init__(self) -> None:
        self._firsts: list[int] = []
        self._stages: list[int] = []

    def see(self, chunk: ScheduleChunk) -> ScheduleChunk:
        """Learn from ``chunk`` (seeing a chunk again, as a re-read schedule does, is harmless)."""
        changes = np.flatnonzero(np.diff(chunk.stages)) + 1
        for position in [0, *changes.tolist()]:
            stage = int(chunk.stages[position])
            if not self._stages or stage > self._stages[-1]:
                self._firsts.append(chunk.first + position)
                self._stages.append(stage)
        return chunk

    def stage_of(self, index: int) -> int:
        """The stage of arrival ``index``, which must be in a chunk seen already."""
        at = bisect.bisect_right(self._firsts, index) - 1
        if at < 0:
            raise LookupError(f"arrival {index} is in no chunk seen yet")
        return self._stages[at]


def build_schedule(shape: Shape, process: ArrivalProcess, seed: int) -> Schedule:
    """The whole of ``schedule_chunks`` in memory."""
    chunks = list(schedule_chunks(shape, process, seed))
    return Schedule(
        np.concatenate([c.offsets for c in chunks]) if chunks else np.empty(0),
        np.concatenate([c.stages for c in chunks]) if chunks else np.empty(0, dtype=np.intp),
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
