"""Trace replay as an arrival process: the schedule is the trace's own arrival times.

Unlike the random processes, a trace is not drawn per stage: ``schedule(shape)`` lays the whole
replayed trace on the run's timeline (one arrival per row, in time order, so arrival ``i`` is
row ``i`` and every worker knows its requests' lengths from the index alone). The run's shape is
the one stage ``trace_shape`` derives (the trace's mean rate over its window), which is what the
summary reports as the offered rate.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ramplab.load.arrivals.base import CHUNK, Offsets, check_args
from ramplab.load.shapes import Shape, parse_shape
from ramplab.load.trace import Trace, parse_trace_spec

__all__ = ["TraceArrivals", "trace_shape"]


def trace_shape(trace: Trace) -> Shape:
    """One stage holding every arrival, no warm-up, at the trace's mean rate."""
    return parse_shape(shape_text(trace))


def shape_text(trace: Trace) -> str:
    duration = trace.duration_s
    return f"custom:{len(trace) / duration!r}@{duration!r}s/0.0s"


class TraceArrivals:
    """The arrivals of a replayed trace (``--ramplab-trace``)."""

    name = "trace"

    def __init__(self, trace: Trace) -> None:
        self.trace = trace

    @classmethod
    def from_spec(cls, spec: str, field: str) -> TraceArrivals:
        return cls(parse_trace_spec(spec, field))

    def chunks(
        self, rate: float, duration_s: float, rng: np.random.Generator, size: int = CHUNK
    ) -> Iterator[Offsets]:
        """The trace's offsets inside ``[0, duration_s)`` (the rate plays no part)."""
        check_args(rate, duration_s)
        yield from _slices(self.offsets(rate, duration_s, rng), size)

    def offsets(self, rate: float, duration_s: float, rng: np.random.Generator) -> Offsets:
        check_args(rate, duration_s)
        return self.trace.offsets[self.trace.offsets < duration_s].copy()

    def schedule_offsets(self, shape: Shape) -> Offsets:
        """Every arrival that falls inside the run: the replayed trace, cut at the shape's end."""
        return self.trace.offsets[self.trace.offsets < shape.duration_s].copy()

    def schedule_chunks(self, shape: Shape, size: int = CHUNK) -> Iterator[Offsets]:
        """``schedule_offsets`` in chunks (views: the trace is in memory already, with its
        lengths, so replaying it costs no schedule of its own)."""
        offsets = self.trace.offsets
        yield from _slices(offsets[: np.searchsorted(offsets, shape.duration_s)], size)


def _slices(offsets: Offsets, size: int) -> Iterator[Offsets]:
    for first in range(0, len(offsets), size):
        yield offsets[first : first + size]
