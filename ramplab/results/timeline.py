"""The run second by second, from the records in one streamed pass: the report's time series.

Per second of the run (second 0 starts at ``summary.run_start``): requests **sent** (by their
first send, ``actual_start``), requests that **failed** (by intended start; unfinished ones, cut
by the run, are not failures), the mean number **in flight** (first send → final outcome,
``intended_start + total_ms``: the time each request spent in flight inside that second, summed,
÷ 1 s — exact), and **TTFT p50/p99** of the successful requests intended to start in it.

Memory is bounded by the run's length in seconds, not by its records: the counters are arrays
of one value per second, and the TTFT percentiles come from logarithmic buckets per second (the
live view's DDSketch rule, ``metrics/sketch.py``: every quantile within ``ALPHA`` = 1 % relative
error) — so the per-second TTFT is within 1 %, while every per-step figure stays exact.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from ramplab.measure.record import UNFINISHED
from ramplab.results.columnar import np_of, valid

__all__ = ["ALPHA", "TIMELINE_COLUMNS", "Timeline", "TimelineBuilder"]

Floats = NDArray[np.float64]
TIMELINE_COLUMNS = ["intended_start", "actual_start", "attempts", "total_ms", "ok", "error_kind",
                    "ttft_ms"]  # fmt: skip
ALPHA = 0.01
_LOG_GAMMA = math.log((1 + ALPHA) / (1 - ALPHA))
_GAMMA = (1 + ALPHA) / (1 - ALPHA)
# A bucket index per second packed into one integer: indices stay within ±_HALF for any value
# from 1e-9 ms to 1e9 ms (|log(v)| / log γ < 1,040).
_HALF = 2048
_SPAN = 2 * _HALF
_MIN_MS = 1e-6


@dataclass(frozen=True)
class Timeline:
    """Per second from ``start_s`` (seconds after the run's start): one value per second,
    ``nan`` where a percentile had no request."""

    start_s: int
    sent: Floats
    failed: Floats
    in_flight: Floats
    ttft_p50_ms: Floats
    ttft_p99_ms: Floats

    @property
    def seconds(self) -> Floats:
        return np.arange(self.sent.size, dtype=np.float64) + self.start_s

    @classmethod
    def empty(cls) -> Timeline:
        none = np.empty(0)
        return cls(0, none, none, none, none, none)


@dataclass
class _Series:
    """A growable array of one value per second, indexed by absolute second."""

    start: int = 0
    values: Floats = field(default_factory=lambda: np.zeros(0))

    def _cover(self, lo: int, hi: int) -> None:
        if self.values.size == 0:
            self.start, self.values = lo, np.zeros(hi - lo + 1)
            return
        end = self.start + self.values.size - 1
        before, after = max(0, self.start - lo), max(0, hi - end)
        if before or after:
            self.values = np.pad(self.values, (before, after))
            self.start -= before

    def add(self, seconds: NDArray[np.int64], weights: Floats) -> None:
        if seconds.size == 0:
            return
        lo, hi = int(seconds.min()), int(seconds.max())
        self._cover(lo, hi)
        self.values += np.bincount(seconds - self.start, weights, minlength=self.values.size)[
            : self.values.size
        ]

    def dense(self, lo: int, hi: int) -> Floats:
        out = np.zeros(hi - lo + 1)
        if self.values.size:
            a, b = max(lo, self.start), min(hi, self.start + self.values.size - 1)
            if a <= b:
                out[a - lo : b - lo + 1] = self.values[a - self.start : b - self.start + 1]
        return out


class TimelineBuilder:
    """Fed every batch of the run's records (``TIMELINE_COLUMNS`` at least), in any order."""

    def __init__(self, run_start: float | None) -> None:
        self.origin = run_start
        self.sent = _Series()
        self.failed = _Series()
        self.in_flight = _Series()
        self.ttft: Counter[int] = Counter()  # second × _SPAN + bucket + _HALF → count

    def add(self, batch: pa.RecordBatch) -> None:
        if self.origin is None or batch.num_rows == 0:
            return
        intended = batch.column("intended_start").to_numpy(zero_copy_only=False) - self.origin
        sent = np_of(batch.column("attempts"), 0, np.int64) > 0
        first_send = np_of(batch.column("actual_start"), 0.0, np.float64) - self.origin
        self.sent.add(np.floor(first_send[sent]).astype(np.int64), np.ones(int(sent.sum())))
        ok = np_of(batch.column("ok"), False, bool)
        kinds = batch.column("error_kind").fill_null("").to_numpy(zero_copy_only=False)
        failed = ~ok & (kinds != UNFINISHED)
        self.failed.add(np.floor(intended[failed]).astype(np.int64), np.ones(int(failed.sum())))
        total = batch.column("total_ms")
        timed = sent & valid(total)
        end = intended + np_of(total, 0.0, np.float64) / 1000.0
        self._flight(first_send[timed], np.maximum(end[timed], first_send[timed]))
        ttft = batch.column("ttft_ms")
        measured = ok & valid(ttft)
        values = np.maximum(np_of(ttft, 0.0, np.float64)[measured], _MIN_MS)
        buckets = np.clip(np.ceil(np.log(values) / _LOG_GAMMA), 1 - _HALF, _HALF - 1)
        keys = (
            np.floor(intended[measured]).astype(np.int64) * _SPAN + buckets.astype(np.int64) + _HALF
        )
        unique, counts = np.unique(keys, return_counts=True)
        self.ttft.update(dict(zip(unique.tolist(), counts.tolist(), strict=True)))

    def _flight(self, start: Floats, end: Floats) -> None:
        """Each request's time in flight, split over the seconds it spans: the partial first
        and last seconds directly, the whole seconds between through a difference array."""
        if start.size == 0:
            return
        lo, hi = np.floor(start).astype(np.int64), np.floor(end).astype(np.int64)
        same = lo == hi
        self.in_flight.add(lo, np.where(same, end - start, lo + 1 - start))
        self.in_flight.add(hi[~same], (end - hi)[~same])
        inner = hi - lo >= 2
        if inner.any():
            a, b = lo[inner] + 1, hi[inner]  # whole seconds a … b − 1
            diff = _Series()
            diff.add(np.concatenate([a, b]), np.concatenate([np.ones(a.size), -np.ones(b.size)]))
            whole = np.cumsum(diff.values)
            self.in_flight.add(np.arange(whole.size, dtype=np.int64) + diff.start, whole)

    def finish(self) -> Timeline:
        series = [s for s in (self.sent, self.failed, self.in_flight) if s.values.size]
        if not series:
            return Timeline.empty()
        lo = min(s.start for s in series)
        hi = max(s.start + s.values.size - 1 for s in series)
        p50, p99 = np.full(hi - lo + 1, np.nan), np.full(hi - lo + 1, np.nan)
        if self.ttft:
            keys = np.array(sorted(self.ttft), dtype=np.int64)
            counts = np.array([self.ttft[k] for k in keys.tolist()], dtype=np.int64)
            seconds, buckets = np.divmod(keys, _SPAN)
            cuts = np.flatnonzero(np.diff(seconds)) + 1  # keys are sorted: seconds in runs
            for at, bucket, count in zip(np.split(np.arange(keys.size), cuts),
                                         np.split(buckets - _HALF, cuts),
                                         np.split(counts, cuts), strict=True):  # fmt: skip
                second = int(seconds[at[0]])
                if lo <= second <= hi:
                    p50[second - lo], p99[second - lo] = _quantiles(bucket, count)
        return Timeline(lo, self.sent.dense(lo, hi), self.failed.dense(lo, hi),
                        self.in_flight.dense(lo, hi), p50, p99)  # fmt: skip


def _quantiles(buckets: NDArray[np.int64], counts: NDArray[np.int64]) -> tuple[float, float]:
    """p50 and p99 at rank q · (n − 1), each its bucket's midpoint (DDSketch's estimate)."""
    cumulative = np.cumsum(counts)
    n = int(cumulative[-1])
    out = []
    for q in (0.5, 0.99):
        at = int(np.searchsorted(cumulative, q * (n - 1), side="right"))
        out.append(2 * _GAMMA ** int(buckets[min(at, buckets.size - 1)]) / (_GAMMA + 1))
    return out[0], out[1]
