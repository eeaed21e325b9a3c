"""Per-step figures from the request records: the definitions behind ``summary.json``.

Definitions (``docs/summary.md`` quotes these):

- A record belongs to the stage in ``record.step`` (set by the arrival engine), else to the
  stage containing its *intended* start; it counts only if its intended start lies in the
  stage's measured window (after the warm-up; within 1 µs when the engine set the step, the
  epoch float's resolution). The intended start, not the send time, decides,
  so a late client cannot push its slow requests out of a step.
- ``requests``: records in the window (arrivals a user took, sent or locally throttled);
  ``achieved_qps``: those actually sent (≥ 1 attempt) ÷ the measured window's length;
  ``offered_qps``: ``scheduled`` ÷ the window; ``scheduled``/``dropped`` come from the engine
  (arrivals in the measured window; ``count_measured`` helps), ``None`` when not known.
- ``errors``: failed records by final status (``"503"``), or by error kind when no status;
  ``error_kinds``: failed records by error kind.
- ``goodput_qps``: records with ``slo_ok`` true — or ``ok`` when no SLO was set (``slo_ok`` None).
- ``output_tokens_per_s``: every record's ``output_tokens`` (failed streams included: the
  tokens were delivered) ÷ the window.
- Latency percentiles (p50/p90/p95/p99/p99.9, min, max, mean) use successful records only,
  computed exactly with numpy's default (linear) interpolation on the raw values — never from
  buckets (Locust rounds to two significant digits). ``itl_ms`` pools every gap of every
  successful stream but the coalesced ones (``results/trust.py``: counted in
  ``itl_coalesced``); ``ttfb_ms`` and ``lateness_ms`` cover every record that was sent.
- ``completed`` + ``failed`` + ``unfinished`` = ``requests``: records that ended ok, that
  failed, and that were cut by the run's end, an interruption or a crash (error kind
  ``unfinished``). The conservation law (``results/conservation.py``) holds them against
  ``dispatched``.
- ``error_ratio``, ``errors`` and ``error_kinds`` are over the ``failed`` records: an
  ``unfinished`` request was cut by the run, not failed by the target, and is counted apart.
- ``retry_amplification`` = attempts ÷ requests; ``success_ratio``/``error_ratio``/
  ``goodput_ratio`` are over ``requests`` (so read them with ``drop_ratio`` = dropped ÷ scheduled).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ramplab.load.shapes import Shape, Stage
from ramplab.measure.record import UNFINISHED, RequestRecord
from ramplab.results.server_figures import workload_figures
from ramplab.results.summary import Percentiles
from ramplab.results.trust import stamp_figures

LATENCIES = ("ttft_ms", "ttft_send_ms", "tpot_ms", "ttlt_ms")


def percentiles(values: Iterable[float]) -> Percentiles:
    """p50/p90/p95/p99/p99.9 exactly (linear interpolation), min, max and mean; ``None``
    values when empty."""
    arr = np.fromiter(values, dtype=np.float64)
    if arr.size == 0:
        return Percentiles()
    p50, p90, p95, p99, p999 = (float(v) for v in np.percentile(arr, [50, 90, 95, 99, 99.9]))
    return Percentiles(
        p50=p50,
        p90=p90,
        p95=p95,
        p99=p99,
        p999=p999,
        min=float(arr.min()),
        max=float(arr.max()),
        mean=float(arr.mean()),
        count=int(arr.size),
    )


def _ratio(num: float, den: float | None) -> float | None:
    return num / den if den is not None and den > 0 else None


def _rate(num: float, window_s: float) -> float:
    # A plain run without records, or one record that took no time, has no window to divide.
    return num / window_s if window_s > 0 else 0.0


def _good(r: RequestRecord) -> bool:
    return bool(r.slo_ok) if r.slo_ok is not None else r.ok


def measure(
    records: Sequence[RequestRecord],
    window_s: float,
    scheduled: int | None = None,
    dropped: int | None = None,
) -> dict[str, Any]:
    """The ``Figures`` fields of ``records`` over a measured window of ``window_s`` seconds."""
    n = len(records)
    ok = [r for r in records if r.ok]
    sent = [r for r in records if r.attempts > 0]
    attempts = sum(r.attempts for r in records)
    good = sum(1 for r in records if _good(r))
    tokens = sum(r.output_tokens or 0 for r in records)
    # Unfinished requests are neither: cut by the run, not failed by the target (their own term).
    failed = [r for r in records if not r.ok and r.error_kind != UNFINISHED]
    unfinished = sum(1 for r in records if not r.ok and r.error_kind == UNFINISHED)
    errors = Counter(
        str(r.status) if r.status is not None else (r.error_kind or "unknown") for r in failed
    )
    kinds = Counter(r.error_kind or "unknown" for r in failed)
    out: dict[str, Any] = {
        "scheduled": scheduled,
        "dropped": dropped,
        "requests": n,
        "ok": len(ok),
        "completed": len(ok),
        "failed": len(failed),
        "unfinished": unfinished,
        "attempts": attempts,
        "offered_qps": _ratio(scheduled, window_s) if scheduled is not None else None,
        "achieved_qps": _rate(len(sent), window_s),
        "goodput_qps": _rate(good, window_s),
        "output_tokens_per_s": _rate(tokens, window_s),
        "attempts_per_s": _rate(attempts, window_s),
        "retry_amplification": _ratio(attempts, n),
        "success_ratio": _ratio(len(ok), n),
        "error_ratio": _ratio(len(failed), n),
        "goodput_ratio": _ratio(good, n),
        "drop_ratio": _ratio(dropped, scheduled) if dropped is not None else None,
        "errors": dict(sorted(errors.items())),
        "error_kinds": dict(sorted(kinds.items())),
        "itl_ms": percentiles(g for r in ok for g in r.measured_itl()),
        "ttfb_ms": percentiles(r.ttfb_ms for r in sent if r.ttfb_ms is not None),
        "lateness_ms": percentiles(r.lateness_ms for r in sent),
    }
    for name in LATENCIES:
        values = (getattr(r, name) for r in ok)
        out[name] = percentiles(v for v in values if v is not None)
    out.update(workload_figures(records, percentiles))  # reasoning phases, prefix-cache hits
    out.update(stamp_figures(records))
    return out


# A wall-clock epoch as a float resolves ~0.24 µs today; 1 µs covers it and its round trip.
EPOCH_SLACK_S = 1e-6


def stage_of(record: RequestRecord, shape: Shape, run_start: float) -> Stage | None:
    """The record's stage: ``record.step`` when set, else by its intended start."""
    if record.step is not None:
        return shape.stages[record.step] if 0 <= record.step < len(shape.stages) else None
    return shape.stage_at(record.intended_start - run_start)


def group_measured(
    records: Iterable[RequestRecord], shape: Shape, run_start: float
) -> list[list[RequestRecord]]:
    """Records per stage, keeping only those whose intended start is in the measured window."""
    groups: list[list[RequestRecord]] = [[] for _ in shape.stages]
    for r in records:
        st = stage_of(r, shape, run_start)
        if st is None:
            continue
        offset = r.intended_start - run_start
        # The engine's own step is trusted to the epoch's resolution: an arrival scheduled on
        # a stage's first instant comes back as run_start + offset, a float near 1.8e9 (steps of
        # 2.4e-7 s), and may read a hair before the window it was counted in (``scheduled``,
        # from the exact offsets) — it was dropped from every window, a request without a count.
        slack = EPOCH_SLACK_S if r.step is not None else 0.0
        if st.measured_start_s - slack <= offset < st.end_s + slack:
            groups[st.index].append(r)
    return groups


def count_measured(offsets_s: ArrayLike, shape: Shape) -> list[int]:
    """Arrivals (run offsets) per stage inside the measured windows: ``scheduled``/``dropped``."""
    t = np.asarray(offsets_s, dtype=np.float64)
    return [
        int(np.count_nonzero((t >= st.measured_start_s) & (t < st.end_s))) for st in shape.stages
    ]


class MeasuredCounter:
    """``count_measured`` kept up to date one offset at a time, in constant memory: a worker of a
    ten-hour run counts millions of arrivals and must not keep their offsets."""

    def __init__(self, shape: Shape) -> None:
        self.shape = shape
        self.counts = [0] * len(shape.stages)

    def add(self, offset_s: float) -> None:
        stage = self.shape.stage_at(offset_s)
        if stage is not None and stage.measured_start_s <= offset_s < stage.end_s:
            self.counts[stage.index] += 1


class MeasuredPeak:
    """Per stage, the largest value seen while the clock was in its measured window."""

    def __init__(self, shape: Shape) -> None:
        self.shape = shape
        self.peaks = [0] * len(shape.stages)

    def add(self, offset_s: float, value: int) -> None:
        stage = self.shape.stage_at(offset_s)
        if stage is not None and stage.measured_start_s <= offset_s < stage.end_s:
            self.peaks[stage.index] = max(self.peaks[stage.index], value)


def recovery_time_s(
    records: Iterable[RequestRecord],
    outage_end: float,
    *,
    window_s: float = 5.0,
    threshold: float = 0.95,
    min_requests: int = 1,
    until: float | None = None,
    use_goodput: bool = False,
) -> float | None:
    """Seconds from ``outage_end`` until a sliding window's success ratio reaches ``threshold``.

    Records are placed by intended start (epoch seconds, like ``outage_end``). Candidate window
    starts are ``outage_end`` and every later intended start; the first window
    ``[c, c + window_s)`` with ≥ ``min_requests`` records of which a share ≥ ``threshold``
    succeeded (or met the SLOs, with ``use_goodput``) gives ``c − outage_end``. A window must
    end by ``until`` (default: the last record's start), so a thin tail cannot declare
    recovery; ``None`` means it did not recover within the data.
    """
    starts = np.array([r.intended_start for r in records], dtype=np.float64)
    good = np.array([_good(r) if use_goodput else r.ok for r in records], dtype=bool)
    return recovery_from(starts, good, outage_end, window_s=window_s, threshold=threshold,
                         min_requests=min_requests, until=until)  # fmt: skip


def recovery_from(
    starts: NDArray[np.float64],
    good: NDArray[np.bool_],
    outage_end: float,
    *,
    window_s: float = 5.0,
    threshold: float = 0.95,
    min_requests: int = 1,
    until: float | None = None,
) -> float | None:
    """``recovery_time_s`` over columns: each record's intended start and whether it counts as
    good (succeeded, or met the SLOs)."""
    after = starts >= outage_end
    order = np.lexsort((good[after], starts[after]))
    t = starts[after][order]
    if t.size == 0:
        return None
    good = np.concatenate([[0], np.cumsum(good[after][order])])
    end = t[-1] if until is None else until
    for c in np.concatenate([[outage_end], t]):
        if c + window_s > end:
            return None
        lo = int(np.searchsorted(t, c, side="left"))
        hi = int(np.searchsorted(t, c + window_s, side="left"))
        n = hi - lo
        if n >= min_requests and (good[hi] - good[lo]) >= threshold * n:
            return float(c - outage_end)
    return None
