"""Per-step statistics for ``summary.json``'s ``steps`` list, from the request records.

Definitions (``docs/metrics.md`` should quote these):

- A record belongs to the stage in ``record.step`` (set by the arrival engine), else to the
  stage containing its *intended* start; it counts only if its intended start lies in the
  stage's measured window (after the warm-up). The intended start, not the send time, decides,
  so a late client cannot push its slow requests out of a step.
- ``requests``: records in the window (arrivals a user took, sent or locally throttled);
  ``achieved_qps``: those actually sent (≥ 1 attempt) ÷ the measured window's length;
  ``offered_qps``: ``scheduled`` ÷ the window; ``scheduled``/``dropped`` come from the engine
  (arrivals in the measured window; ``count_measured`` helps), ``None`` when not supplied.
- ``errors``: failed records by final status (``"503"``), or by error kind when no status.
- ``goodput_qps``: records with ``slo_ok`` true — or ``ok`` when no SLO was set (``slo_ok`` None).
- ``output_tokens_per_s``: every record's ``output_tokens`` (failed streams included: the
  tokens were delivered) ÷ the window.
- Latency percentiles use successful records only, computed exactly with numpy's default
  (linear) interpolation on the raw values — never from buckets (Locust rounds to two
  significant digits). ``itl_ms`` pools every gap of every successful stream.
- ``retry_amplification`` = attempts ÷ requests; ``success_ratio``/``error_ratio``/
  ``goodput_ratio`` are over ``requests`` (so read them with ``drop_ratio`` = dropped ÷ scheduled).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ramplab.load.shapes import Shape, Stage
from ramplab.measure.record import RequestRecord

Percentiles = dict[str, float | None]
LATENCIES = ("ttft_ms", "ttft_send_ms", "tpot_ms", "ttlt_ms")


def percentiles(values: Iterable[float]) -> Percentiles:
    """``{"p50", "p90", "p99"}`` exactly (linear interpolation), ``None`` values when empty."""
    arr = np.fromiter(values, dtype=np.float64)
    if arr.size == 0:
        return {"p50": None, "p90": None, "p99": None}
    p50, p90, p99 = np.percentile(arr, [50, 90, 99])
    return {"p50": float(p50), "p90": float(p90), "p99": float(p99)}


def _ratio(num: float, den: float) -> float | None:
    return num / den if den > 0 else None


@dataclass(frozen=True, slots=True)
class StepStats:
    """One stage's figures; ``to_dict()`` is the ``summary.json`` form."""

    index: int
    start_s: float
    duration_s: float
    warmup_s: float
    measured_s: float
    target_qps: float
    scheduled: int | None
    dropped: int | None
    requests: int
    ok: int
    attempts: int
    offered_qps: float | None
    achieved_qps: float
    goodput_qps: float
    output_tokens_per_s: float
    attempts_per_s: float
    retry_amplification: float | None
    success_ratio: float | None
    error_ratio: float | None
    goodput_ratio: float | None
    drop_ratio: float | None
    errors: dict[str, int] = field(default_factory=dict)
    ttft_ms: Percentiles = field(default_factory=dict)
    ttft_send_ms: Percentiles = field(default_factory=dict)
    itl_ms: Percentiles = field(default_factory=dict)
    tpot_ms: Percentiles = field(default_factory=dict)
    ttlt_ms: Percentiles = field(default_factory=dict)
    lateness_ms: Percentiles = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _good(r: RequestRecord) -> bool:
    return bool(r.slo_ok) if r.slo_ok is not None else r.ok


def measure(
    records: Sequence[RequestRecord],
    window_s: float,
    scheduled: int | None = None,
    dropped: int | None = None,
) -> dict[str, Any]:
    """The step metrics of ``records`` over a measured window of ``window_s`` seconds."""
    n = len(records)
    ok = [r for r in records if r.ok]
    attempts = sum(r.attempts for r in records)
    sent = sum(1 for r in records if r.attempts > 0)
    good = sum(1 for r in records if _good(r))
    tokens = sum(r.output_tokens or 0 for r in records)
    errors = Counter(
        str(r.status) if r.status is not None else (r.error_kind or "unknown")
        for r in records
        if not r.ok
    )
    out: dict[str, Any] = {
        "scheduled": scheduled,
        "dropped": dropped,
        "requests": n,
        "ok": len(ok),
        "attempts": attempts,
        "offered_qps": _ratio(scheduled, window_s) if scheduled is not None else None,
        "achieved_qps": sent / window_s,
        "goodput_qps": good / window_s,
        "output_tokens_per_s": tokens / window_s,
        "attempts_per_s": attempts / window_s,
        "retry_amplification": _ratio(attempts, n),
        "success_ratio": _ratio(len(ok), n),
        "error_ratio": _ratio(n - len(ok), n),
        "goodput_ratio": _ratio(good, n),
        "drop_ratio": (
            _ratio(dropped, scheduled) if dropped is not None and scheduled is not None else None
        ),
        "errors": dict(sorted(errors.items())),
        "itl_ms": percentiles(g for r in ok for g in r.itl_ms),
        "lateness_ms": percentiles(r.lateness_ms for r in records if r.attempts > 0),
    }
    for name in LATENCIES:
        values = (getattr(r, name) for r in ok)
        out[name] = percentiles(v for v in values if v is not None)
    return out


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
        if st is not None and st.in_measured(r.intended_start - run_start):
            groups[st.index].append(r)
    return groups


def count_measured(offsets_s: ArrayLike, shape: Shape) -> list[int]:
    """Arrivals (run offsets) per stage inside the measured windows: ``scheduled``/``dropped``."""
    t = np.asarray(offsets_s, dtype=np.float64)
    return [
        int(np.count_nonzero((t >= st.measured_start_s) & (t < st.end_s))) for st in shape.stages
    ]


def step_stats(
    records: Iterable[RequestRecord],
    shape: Shape,
    run_start: float,
    scheduled: Sequence[int] | None = None,
    dropped: Sequence[int] | None = None,
) -> list[StepStats]:
    """Every stage's statistics; ``run_start`` is the epoch time of the schedule's offset 0."""
    for name, counts in (("scheduled", scheduled), ("dropped", dropped)):
        if counts is not None and len(counts) != len(shape.stages):
            raise ValueError(f"{name} has {len(counts)} counts for {len(shape.stages)} stages")
    result = []
    for st, group in zip(shape.stages, group_measured(records, shape, run_start), strict=True):
        m = measure(
            group,
            st.measured_s,
            scheduled[st.index] if scheduled is not None else None,
            dropped[st.index] if dropped is not None else None,
        )
        result.append(
            StepStats(
                index=st.index,
                start_s=st.start_s,
                duration_s=st.duration_s,
                warmup_s=st.warmup_s,
                measured_s=st.measured_s,
                target_qps=st.rate,
                **m,
            )
        )
    return result


def summarize(
    records: Sequence[RequestRecord],
    shape: Shape,
    run_start: float,
    scheduled: Sequence[int] | None = None,
    dropped: Sequence[int] | None = None,
) -> dict[str, Any]:
    """Run-level metrics over all measured windows, plus ``steps``: the gates' input."""
    steps = step_stats(records, shape, run_start, scheduled, dropped)
    measured = [r for g in group_measured(records, shape, run_start) for r in g]
    window = sum(st.measured_s for st in shape.stages)
    total = measure(
        measured,
        window,
        sum(scheduled) if scheduled is not None else None,
        sum(dropped) if dropped is not None else None,
    )
    return {**total, "measured_s": window, "steps": [s.to_dict() for s in steps]}


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
    after = sorted(
        (r.intended_start, _good(r) if use_goodput else r.ok)
        for r in records
        if r.intended_start >= outage_end
    )
    if not after:
        return None
    t = np.array([a for a, _ in after])
    good = np.concatenate([[0], np.cumsum([g for _, g in after])])
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
