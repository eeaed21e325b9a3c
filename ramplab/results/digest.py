"""What the report needs from ``requests.jsonl`` beyond the summary, in one streamed pass.

The summary holds percentiles; the charts and the recommendations also need distributions (the
TTFT and ITL CDFs), per-request phase vectors (the phase breakdown), what triggered each retry,
and per-stream rates. ``digest_records`` reads the file line by line — never a list of every
record — and keeps, per step, only those values as numpy arrays.

A record counts in a step exactly when it counts in the summary: the stage in ``record.step``
(else the one holding its intended start) and an intended start inside the stage's measured
window; a plain run (no ramp engine) has one step holding every record. The steps are rebuilt
from the summary's own ``steps`` (start, duration, warm-up), so an interrupted run's truncated
steps are used as they are.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from ramplab.errors import ShapeError
from ramplab.load.shapes import Shape, Stage
from ramplab.measure.record import RequestRecord
from ramplab.records.files import RecordFiles
from ramplab.results.steps import stage_of
from ramplab.results.summary import RunSummary

__all__ = [
    "PHASE_COLUMNS",
    "RunDigest",
    "StepDigest",
    "digest_records",
    "iter_records",
    "read_digest",
    "step_shape",
]

Floats = NDArray[np.float64]

# One row per successful record: the columns of ``StepDigest.phases``. ``lateness`` is the
# client's own delay before the first send (its ``client`` phase included); ``retries`` what
# earlier attempts and back-off added before the final send; the client's network phases are the
# final attempt's; the server's are what ``server_timing_ms`` disclosed, ``decode`` without the
# signature that the reference target counts inside it (see ``breakdown.py``).
CLIENT_COLUMNS = ("lateness", "retries", "dns", "connect", "tls", "stall", "send", "wait",
                  "first_token", "stream")  # fmt: skip
SERVER_COLUMNS = ("auth", "ratelimit", "queue", "prefill", "decode", "sign_queue", "lock_wait",
                  "sign")  # fmt: skip
PHASE_COLUMNS = ("ttlt", *CLIENT_COLUMNS, *SERVER_COLUMNS, "server_seen")
_SIGNATURE = ("sign_queue", "lock_wait", "sign")


def _array(values: Iterable[float]) -> Floats:
    if isinstance(values, array):
        return np.frombuffer(values, dtype=np.float64).copy()
    return np.fromiter(values, dtype=np.float64)


@dataclass
class StepDigest:
    """One step's distributions; arrays are of successful records unless named otherwise."""

    index: int
    ttft_ms: Floats
    ttft_send_ms: Floats
    itl_ms: Floats
    stream_tokens_per_s: Floats  # output tokens ÷ (TTLT from the final send), per stream
    lateness_ms: Floats  # every record that was sent
    phases: Floats  # shape (n, len(PHASE_COLUMNS))
    retried: dict[str, int]  # attempts that were retried, by their status (or error kind)
    failed_with_retry_after: dict[str, int]  # failed records whose last answer had Retry-After
    retry_after_answers: int  # attempts (any, retried or final) answered with a Retry-After
    tokens_counted: dict[str, int]  # records by ``output_tokens_source``

    def column(self, name: str) -> Floats:
        return self.phases[:, PHASE_COLUMNS.index(name)]


@dataclass
class RunDigest:
    """Every step's digest, in the summary's order; ``records`` = lines read."""

    steps: tuple[StepDigest, ...]
    records: int = 0

    def pooled(self, name: str) -> Floats:
        """One array over every step (``ttft_ms``, ``itl_ms``, … or ``phases``)."""
        arrays = [getattr(step, name) for step in self.steps]
        if name == "phases":
            return np.vstack(arrays) if arrays else np.empty((0, len(PHASE_COLUMNS)))
        return np.concatenate(arrays) if arrays else np.empty(0)


def _doubles() -> array[float]:
    return array("d")


@dataclass
class _Acc:
    # C doubles, not lists of Python floats: a long run's ITL values are 8 bytes each, not 32.
    ttft: array[float] = field(default_factory=_doubles)
    ttft_send: array[float] = field(default_factory=_doubles)
    itl: array[float] = field(default_factory=_doubles)
    rate: array[float] = field(default_factory=_doubles)
    lateness: array[float] = field(default_factory=_doubles)
    phases: array[float] = field(default_factory=_doubles)  # rows of len(PHASE_COLUMNS)
    retried: Counter[str] = field(default_factory=Counter)
    failed_ra: Counter[str] = field(default_factory=Counter)
    ra_answers: int = 0
    sources: Counter[str] = field(default_factory=Counter)

    def add(self, r: RequestRecord) -> None:
        for attempt in r.attempt_log[:-1]:
            self.retried[_outcome(attempt.status, attempt.error_kind)] += 1
        self.ra_answers += sum(1 for a in r.attempt_log if a.retry_after_s is not None)
        if r.attempts > 0:
            self.lateness.append(r.lateness_ms)
        if r.output_tokens is not None:
            self.sources[r.output_tokens_source or "unknown"] += 1
        if not r.ok:
            last = r.attempt_log[-1] if r.attempt_log else None
            if last is not None and last.retry_after_s is not None:
                self.failed_ra[_outcome(r.status, r.error_kind)] += 1
            return
        if r.ttft_ms is not None:
            self.ttft.append(r.ttft_ms)
        if r.ttft_send_ms is not None:
            self.ttft_send.append(r.ttft_send_ms)
        self.itl.extend(r.measured_itl())
        if r.output_tokens and r.ttlt_send_ms:
            self.rate.append(r.output_tokens * 1000.0 / r.ttlt_send_ms)
        if r.ttlt_ms is not None:
            self.phases.extend(_phase_row(r, r.ttlt_ms))

    def freeze(self, index: int) -> StepDigest:
        phases = _array(self.phases).reshape(-1, len(PHASE_COLUMNS))
        return StepDigest(
            index=index,
            ttft_ms=_array(self.ttft),
            ttft_send_ms=_array(self.ttft_send),
            itl_ms=_array(self.itl),
            stream_tokens_per_s=_array(self.rate),
            lateness_ms=_array(self.lateness),
            phases=phases,
            retried=dict(sorted(self.retried.items())),
            failed_with_retry_after=dict(sorted(self.failed_ra.items())),
            retry_after_answers=self.ra_answers,
            tokens_counted=dict(sorted(self.sources.items())),
        )


def _outcome(status: int | None, kind: str | None) -> str:
    return str(status) if status is not None else (kind or "unknown")


def _phase_row(r: RequestRecord, ttlt: float) -> tuple[float, ...]:
    p, s = r.phases_ms, r.server_timing_ms
    # intended start → final send = lateness, plus earlier attempts and back-off when retried
    final_send = ttlt - r.ttlt_send_ms if r.ttlt_send_ms is not None else r.lateness_ms
    retries = max(0.0, final_send - r.lateness_ms)
    client = [r.lateness_ms, retries, *(p.get(k, 0.0) for k in CLIENT_COLUMNS[2:])]
    server = {k: s.get(k, 0.0) for k in SERVER_COLUMNS}
    signature = sum(server[k] for k in _SIGNATURE)
    server["decode"] = max(0.0, server["decode"] - signature)  # see breakdown.py: no overlap
    seen = 1.0 if any(k in s for k in SERVER_COLUMNS) else 0.0
    return (ttlt, *client, *(server[k] for k in SERVER_COLUMNS), seen)


def step_shape(summary: RunSummary) -> Shape | None:
    """The run's stages rebuilt from the summary's steps (``None`` for a plain run's or an
    unreadable shape): with ``steps.stage_of`` and ``Stage.in_measured``, the rule that puts a
    record in a step exactly when it counts in the summary."""
    stages = tuple(
        Stage(i, st.start_s, st.duration_s, st.warmup_s, st.target_qps or st.target_users or 0.0)
        for i, st in enumerate(summary.steps)
    )
    try:
        return Shape(stages) if stages else None
    except ShapeError:
        return None


def digest_records(records: Iterable[RequestRecord], summary: RunSummary) -> RunDigest:
    """The digest of ``records`` (an iterator is consumed once) against ``summary``'s steps."""
    accs = [_Acc() for _ in summary.steps]
    plain = summary.mode is None and len(accs) == 1
    shape = None if plain else step_shape(summary)
    start = summary.run_start or 0.0
    read = 0
    for r in records:
        read += 1
        if plain:
            accs[0].add(r)
            continue
        if shape is None:
            continue
        st = stage_of(r, shape, start)
        if st is not None and st.in_measured(r.intended_start - start):
            accs[st.index].add(r)
    steps = tuple(acc.freeze(summary.steps[i].index) for i, acc in enumerate(accs))
    return RunDigest(steps, read)


def iter_records(files: RecordFiles) -> Iterator[RequestRecord]:
    """Each record of a run, one batch in memory at a time (none when it has no records)."""
    return files.records()


def read_digest(files: RecordFiles, summary: RunSummary) -> RunDigest:
    """The digest of a run's records (an empty one when it has none)."""
    return digest_records(files.records(), summary)
