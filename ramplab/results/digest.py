"""What the report needs from the records beyond the summary, in one pass, a batch at a time.

The summary holds percentiles; the charts and the recommendations also need distributions (the
TTFT, ITL, TPOT and TTLT CDFs), per-request phase vectors (the phase breakdown), what triggered
each retry, per-stream rates, the tokens each step sent and received, how many requests were in
flight through each step, and the run second by second (``timeline.py``). ``read_digest``
reads only the columns it needs, a batch at a time — never a record object — and keeps, per
step, only those values as numpy arrays.

A record counts in a step exactly when it counts in the summary: the stage in ``record.step``
(else the one holding its intended start) and an intended start inside the stage's measured
window; a plain run (no ramp engine) has one step holding every record. The steps are rebuilt
from the summary's own ``steps`` (start, duration, warm-up), so an interrupted run's truncated
steps are used as they are.

Requests in flight are a matter of time, not of membership: a step's concurrency counts every
sent request (whichever step it counts in, warm-up and drain included) between its first send
(``actual_start``) and its final outcome (``intended_start + total_ms``), clipped to the step's
measured window. The mean is the time-average over the window (Little's law: Σ time in flight
÷ the window's length), the max the exact peak of a sweep over those intervals.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from ramplab.errors import ShapeError
from ramplab.load.shapes import Shape, Stage
from ramplab.measure.record import RequestRecord
from ramplab.records.files import RecordFiles
from ramplab.records.schema import batch_of
from ramplab.results.columnar import COLUMNS, Grouping, measured_itl, np_of, valid
from ramplab.results.summary import RunSummary
from ramplab.results.timeline import TIMELINE_COLUMNS, Timeline, TimelineBuilder

__all__ = [
    "PHASE_COLUMNS",
    "RunDigest",
    "StepDigest",
    "digest_batches",
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
DIGEST_COLUMNS = list(dict.fromkeys([*COLUMNS, "attempt_log", "output_tokens_source",
                                     "ttlt_send_ms", "phases_ms", "server_timing_ms",
                                     *TIMELINE_COLUMNS]))  # fmt: skip


def _array(chunks: list[Floats]) -> Floats:
    """The chunks joined; the list is emptied (its arrays freed) as it is."""
    joined = np.concatenate(chunks) if chunks else np.empty(0)
    chunks.clear()
    return joined


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
    tpot_ms: Floats = field(default_factory=lambda: np.empty(0))
    # Σ prompt tokens of the sent records, Σ output tokens of every record (as the summary's
    # ``output_tokens_per_s`` counts them): ÷ the measured window, tokens/s in and out.
    prompt_tokens: int = 0
    output_tokens: int = 0
    in_flight_mean: float | None = None  # None: no measured window
    in_flight_max: int | None = None

    @property
    def ttlt_ms(self) -> Floats:
        """TTLT of the successful records (the phase rows' first column)."""
        return self.column("ttlt")

    def column(self, name: str) -> Floats:
        return self.phases[:, PHASE_COLUMNS.index(name)]


@dataclass
class RunDigest:
    """Every step's digest, in the summary's order; ``records`` = lines read."""

    steps: tuple[StepDigest, ...]
    records: int = 0
    timeline: Timeline = field(default_factory=Timeline.empty)

    def pooled(self, name: str) -> Floats:
        """One array over every step (``ttft_ms``, ``itl_ms``, ``tpot_ms``, ``ttlt_ms``, … or
        ``phases``)."""
        arrays = [getattr(step, name) for step in self.steps]
        if name == "phases":
            return np.vstack(arrays) if arrays else np.empty((0, len(PHASE_COLUMNS)))
        return np.concatenate(arrays) if arrays else np.empty(0)


@dataclass
class _Acc:
    # numpy chunks, one per batch: a long run's ITL values are 8 bytes each.
    ttft: list[Floats] = field(default_factory=list)
    ttft_send: list[Floats] = field(default_factory=list)
    tpot: list[Floats] = field(default_factory=list)
    itl: list[Floats] = field(default_factory=list)
    rate: list[Floats] = field(default_factory=list)
    lateness: list[Floats] = field(default_factory=list)
    phases: list[Floats] = field(default_factory=list)  # rows of len(PHASE_COLUMNS)
    retried: Counter[str] = field(default_factory=Counter)
    failed_ra: Counter[str] = field(default_factory=Counter)
    ra_answers: int = 0
    sources: Counter[str] = field(default_factory=Counter)
    prompt_tokens: int = 0
    output_tokens: int = 0
    flights: list[Floats] = field(default_factory=list)  # (n, 2): send, end clipped to the window

    def add(self, batch: pa.RecordBatch) -> None:
        """One step's records of a batch."""
        ok = np_of(batch.column("ok"), False, bool)
        sent = np_of(batch.column("attempts"), 0, np.int64) > 0
        lateness = np_of(batch.column("lateness_ms"), 0.0, np.float64)
        self._attempts(batch, ok)
        tokens = batch.column("output_tokens")
        counted = valid(tokens)
        if counted.any():
            sources = batch.column("output_tokens_source").filter(pa.array(counted)).to_pylist()
            self.sources.update(source or "unknown" for source in sources)
        self.lateness.append(lateness[sent])
        self.output_tokens += int(np_of(tokens, 0, np.int64).sum())
        self.prompt_tokens += int(np_of(batch.column("prompt_tokens"), 0, np.int64)[sent].sum())
        for name, into in (("ttft_ms", self.ttft), ("ttft_send_ms", self.ttft_send),
                           ("tpot_ms", self.tpot)):  # fmt: skip
            column = batch.column(name)
            into.append(np_of(column, 0.0, np.float64)[ok & valid(column)])
        self.itl.append(measured_itl(batch, ok))
        count = np_of(tokens, 0, np.int64)
        ttlt_send = np_of(batch.column("ttlt_send_ms"), 0.0, np.float64)
        streamed = ok & (count != 0) & (ttlt_send != 0)
        self.rate.append(count[streamed] * 1000.0 / ttlt_send[streamed])
        ttlt_col = batch.column("ttlt_ms")
        timed = ok & valid(ttlt_col)
        if timed.any():
            self.phases.append(_phase_rows(batch.filter(pa.array(timed))))

    def _attempts(self, batch: pa.RecordBatch, ok: NDArray[np.bool_]) -> None:
        """Retried attempts by outcome, answers with a Retry-After, and failed records whose
        last answer had one."""
        log = batch.column("attempt_log")
        flat = pc.list_flatten(log)
        if len(flat) == 0:
            return
        parents = np.asarray(pc.list_parent_indices(log).to_numpy(zero_copy_only=False))
        last = np.ones(parents.size, dtype=bool)
        last[:-1] = parents[1:] != parents[:-1]
        after = valid(flat.field("retry_after_s"))
        self.ra_answers += int(after.sum())
        if (~last).any():
            retried = flat.filter(pa.array(~last))
            statuses = retried.field("status").to_pylist()
            pairs = zip(statuses, retried.field("error_kind").to_pylist(), strict=True)
            self.retried.update(_outcome(status, kind) for status, kind in pairs)
        failed = np.zeros(batch.num_rows, dtype=bool)
        failed[parents[last & after]] = True
        failed &= ~ok
        if failed.any():
            rows = batch.filter(pa.array(failed))
            pairs = zip(rows.column("status").to_pylist(), rows.column("error_kind").to_pylist(),
                        strict=True)  # fmt: skip
            self.failed_ra.update(_outcome(status, kind) for status, kind in pairs)

    def flight(self, start: Floats, end: Floats, window: tuple[float, float]) -> None:
        """The intervals in flight (epoch seconds) that overlap ``window``, clipped to it."""
        lo, hi = window
        inside = (start < hi) & (end > lo)
        if inside.any():
            self.flights.append(
                np.column_stack([np.maximum(start[inside], lo), np.minimum(end[inside], hi)])
            )

    def concurrency(self, window_s: float, read: bool) -> tuple[float | None, int | None]:
        """(time-average, peak) of the requests in flight over a window of ``window_s``; not
        known without a window or without records (a summary alone)."""
        if window_s <= 0 or not read:
            self.flights = []
            return None, None
        spans = np.vstack(self.flights) if self.flights else np.empty((0, 2))
        self.flights = []
        if spans.shape[0] == 0:
            return 0.0, 0
        mean = float((spans[:, 1] - spans[:, 0]).sum()) / window_s
        times = np.concatenate([spans[:, 0], spans[:, 1]])
        deltas = np.concatenate([np.ones(spans.shape[0]), -np.ones(spans.shape[0])])
        order = np.lexsort((deltas, times))  # at a tie an end comes first: intervals [send, end)
        return mean, int(np.cumsum(deltas[order]).max())

    def freeze(self, index: int, window_s: float, read: bool) -> StepDigest:
        """The step's digest; each field's chunks are released as it is joined, so the peak
        is the digest plus its largest field, not twice the digest."""
        phases = (np.vstack(self.phases) if self.phases
                  else np.empty((0, len(PHASE_COLUMNS))))  # fmt: skip
        self.phases = []
        in_flight_mean, in_flight_max = self.concurrency(window_s, read)
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
            tpot_ms=_array(self.tpot),
            prompt_tokens=self.prompt_tokens,
            output_tokens=self.output_tokens,
            in_flight_mean=in_flight_mean,
            in_flight_max=in_flight_max,
        )


def _outcome(status: int | None, kind: str | None) -> str:
    return str(status) if status is not None else (kind or "unknown")


def _phase_rows(batch: pa.RecordBatch) -> Floats:
    """One ``PHASE_COLUMNS`` row per record (successful, with a TTLT)."""
    ttlt = np_of(batch.column("ttlt_ms"), 0.0, np.float64)
    lateness = np_of(batch.column("lateness_ms"), 0.0, np.float64)
    send_col = batch.column("ttlt_send_ms")
    # intended start → final send = lateness, plus earlier attempts and back-off when retried
    final_send = np.where(valid(send_col), ttlt - np_of(send_col, 0.0, np.float64), lateness)
    retries = np.maximum(0.0, final_send - lateness)
    client = batch.column("phases_ms")
    timing = batch.column("server_timing_ms")
    columns = [ttlt, lateness, retries, *(_lookup(client, k) for k in CLIENT_COLUMNS[2:])]
    server = {k: _lookup(timing, k) for k in SERVER_COLUMNS}
    signature = sum(server[k] for k in _SIGNATURE)
    server["decode"] = np.maximum(0.0, server["decode"] - signature)  # breakdown.py: no overlap
    seen = np.zeros(batch.num_rows, dtype=bool)
    for key in SERVER_COLUMNS:
        seen |= valid(pc.map_lookup(timing, pa.scalar(key), "first"))
    columns += [server[k] for k in SERVER_COLUMNS]
    columns.append(seen.astype(np.float64))
    return np.column_stack(columns)


def _lookup(mapping: pa.Array, key: str) -> Floats:
    return np_of(pc.map_lookup(mapping, pa.scalar(key), "first"), 0.0, np.float64)


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
    """The digest of ``records`` in memory (tests, a few records) against ``summary``'s steps."""
    kept = list(records)
    return digest_batches([batch_of(kept)] if kept else [], summary)


def read_digest(files: RecordFiles, summary: RunSummary) -> RunDigest:
    """The digest of a run's records (an empty one when it has none), one batch at a time."""
    return digest_batches(files.batches(DIGEST_COLUMNS), summary)


def digest_batches(batches: Iterable[pa.RecordBatch], summary: RunSummary) -> RunDigest:
    """The digest of the records in ``batches`` (``DIGEST_COLUMNS`` at least)."""
    accs = [_Acc() for _ in summary.steps]
    plain = summary.mode is None and len(accs) == 1
    shape = None if plain else step_shape(summary)
    # The digest places records as ``Stage.in_measured`` does: no slack at a window's edges.
    grouping = Grouping(shape, summary.run_start or 0.0, slack_s=0.0)
    timeline = TimelineBuilder(summary.run_start)
    windows = _windows(summary)
    read = 0
    for batch in batches:
        read += batch.num_rows
        if not plain and shape is None:
            continue
        timeline.add(batch)
        intended = batch.column("intended_start").to_numpy(zero_copy_only=False)
        start, end = _flights(batch, intended)
        for acc, window in zip(accs, windows, strict=True):
            acc.flight(start, end, window)
        group = grouping.of(batch.column("step"), intended)
        for index in np.unique(group[group >= 0]).tolist():
            accs[index].add(batch.filter(pa.array(group == index)))
    steps = tuple(
        acc.freeze(summary.steps[i].index, summary.steps[i].measured_s, read > 0)
        for i, acc in enumerate(accs)
    )
    return RunDigest(steps, read, timeline.finish())


def _windows(summary: RunSummary) -> list[tuple[float, float]]:
    """Each step's measured window in epoch seconds."""
    origin = summary.run_start or 0.0
    return [
        (origin + st.start_s + st.warmup_s, origin + st.start_s + st.warmup_s + st.measured_s)
        for st in summary.steps
    ]


def _flights(batch: pa.RecordBatch, intended: Floats) -> tuple[Floats, Floats]:
    """Each sent request's first send and final outcome (epoch seconds); the rest: empty."""
    total = batch.column("total_ms")
    sent = (np_of(batch.column("attempts"), 0, np.int64) > 0) & valid(total)
    start = np_of(batch.column("actual_start"), 0.0, np.float64)[sent]
    end = intended[sent] + np_of(total, 0.0, np.float64)[sent] / 1000.0
    return start, np.maximum(end, start)


def iter_records(files: RecordFiles) -> Iterator[RequestRecord]:
    """Each record of a run, one batch in memory at a time (none when it has no records)."""
    return files.records()
