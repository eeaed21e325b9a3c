"""The summary's figures from the records' columns, in bounded memory.

``measure`` in ``steps.py`` states the definitions over ``RequestRecord`` objects; this module
computes the same figures from Arrow batches (``ramplab.records``), one batch in memory at a
time: counts and sums as each batch passes, percentiles by ``records.quantiles`` (numpy's to
the bit, in a few more scans). A run of ten million records is never in memory as objects.

Where a figure needs a record's own logic — the gaps left after coalesced events
(``RequestRecord.measured_itl``), a reasoning stream's two phases (``phase_itls``), a
session's turns — only the rows that have such data are rebuilt as records, batch by batch.
The sessions part keeps its turns' records (sessions are a workload of their own, small).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from ramplab.load.shapes import Shape
from ramplab.measure.reasoning import phase_itls
from ramplab.measure.record import UNFINISHED, RequestRecord
from ramplab.records.quantiles import Exact, GroupedValues, exact_percentiles
from ramplab.records.schema import batch_of, dicts_of, record_from_dict
from ramplab.results.selfcheck import MIN_THIRD
from ramplab.results.slo import RequestSlo
from ramplab.results.summary import Percentiles
from ramplab.results.trust import STAMP_BOUND_MS

__all__ = ["COLUMNS", "Batches", "Grouping", "RunColumns", "in_memory", "outcomes", "scan_run"]

Batches = Callable[[list[str]], Iterable[pa.RecordBatch]]
Values = tuple[NDArray[np.int64], NDArray[np.float64]]  # a metric's groups and values

COLUMNS = [
    "step",
    "intended_start",
    "ok",
    "status",
    "error_kind",
    "attempts",
    "total_ms",
    "turn",
    "lateness_ms",
    "ttfb_ms",
    "ttft_ms",
    "ttft_send_ms",
    "tpot_ms",
    "ttlt_ms",
    "itl_ms",
    "tokens_per_event",
    "coalesced_events",
    "output_tokens",
    "prompt_tokens",
    "requested_prompt_tokens",
    "cached_tokens",
    "slo_ok",
    "answer_ttft_ms",
    "reasoning_events",
    "reasoning_tokens",
    "stamp_error_ms",
]
# Percentile metrics over successful records, and over sent ones.
OK_METRICS = ("ttft_ms", "ttft_send_ms", "tpot_ms", "ttlt_ms", "answer_ttft_ms")
SENT_METRICS = ("ttfb_ms", "lateness_ms")
GAP_METRICS = ("itl_ms", "reasoning_itl_ms", "answer_itl_ms")
# Every slack of ``steps.group_measured``: the engine's step is trusted to the epoch's resolution.
EPOCH_SLACK_S = 1e-6


@dataclass(slots=True)
class _Counts:
    """The additive figures of one group."""

    n: int = 0
    ok: int = 0
    sent: int = 0
    attempts: int = 0
    good: int = 0
    tokens: int = 0
    failed: int = 0
    unfinished: int = 0
    accounted: int = 0
    itl_coalesced: int = 0
    stamps_uncertain: int = 0
    stamps_unbounded: int = 0
    reported: int = 0
    prompt: int = 0
    cached: int = 0
    hits: int = 0
    requested_n: int = 0  # sent records that carry requested_prompt_tokens, and their sum
    requested_sum: int = 0
    served_n: int = 0  # sent records that carry the server's prompt_tokens, and their sum
    served_sum: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    kinds: Counter[str] = field(default_factory=Counter)

    def add(self, other: _Counts) -> None:
        for name in _Counts.__dataclass_fields__:
            if name in ("errors", "kinds"):
                getattr(self, name).update(getattr(other, name))
            else:
                setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass(slots=True)
class RunColumns:
    """What one scan of a run's records gives the producer, per stage (``groups``) and for all
    measured records together (``total``)."""

    counts: list[_Counts]
    total: _Counts
    exact: dict[str, list[Exact]]  # per metric: per stage, then the total
    lateness_growth_ms: list[float | None]
    session_records: list[RequestRecord]
    stamp_error_max_ms: list[float | None]  # per stage, then the total

    def figures(
        self, group: int | None, window_s: float, scheduled: int | None, dropped: int | None
    ) -> dict[str, Any]:
        """``steps.measure``'s fields for one stage (``None``: every measured record)."""
        c = self.total if group is None else self.counts[group]
        at = len(self.counts) if group is None else group
        out: dict[str, Any] = {
            "scheduled": scheduled,
            "dropped": dropped,
            "requests": c.n,
            "ok": c.ok,
            "completed": c.ok,
            "failed": c.failed,
            "unfinished": c.unfinished,
            "attempts": c.attempts,
            "offered_qps": _ratio(scheduled, window_s) if scheduled is not None else None,
            "achieved_qps": _rate(c.sent, window_s),
            "goodput_qps": _rate(c.good, window_s),
            "output_tokens_per_s": _rate(c.tokens, window_s),
            "attempts_per_s": _rate(c.attempts, window_s),
            "retry_amplification": _ratio(c.attempts, c.n),
            "success_ratio": _ratio(c.ok, c.n),
            "error_ratio": _ratio(c.failed, c.n),
            "goodput_ratio": _ratio(c.good, c.n),
            "drop_ratio": _ratio(dropped, scheduled) if dropped is not None else None,
            "errors": dict(sorted(c.errors.items())),
            "error_kinds": dict(sorted(c.kinds.items())),
            "cached_tokens_ratio": c.cached / c.prompt if c.prompt else None,
            "prefix_hit_ratio": c.hits / c.reported if c.reported else None,
            "prompt_tokens_requested": c.requested_sum / c.requested_n if c.requested_n else None,
            "prompt_tokens_served": c.served_sum / c.served_n if c.served_n else None,
            "itl_coalesced": c.itl_coalesced,
            "stamps_uncertain": c.stamps_uncertain,
            "stamps_unbounded": c.stamps_unbounded,
            "stamp_error_max_ms": self.stamp_error_max_ms[at],
        }
        for name in (*OK_METRICS, *SENT_METRICS, *GAP_METRICS, "reasoning_tokens"):
            out[name] = _percentiles(self.exact[name][at])
        return out

    def accounted(self, group: int) -> int:
        return self.counts[group].accounted


def _percentiles(exact: Exact) -> Percentiles:
    values = exact.percentiles()
    if values is None:
        return Percentiles()
    p50, p90, p95, p99, p999 = values
    return Percentiles(
        p50=p50,
        p90=p90,
        p95=p95,
        p99=p99,
        p999=p999,
        min=exact.min,
        max=exact.max,
        mean=exact.total / exact.count,
        count=exact.count,
    )


def _ratio(num: float, den: float | None) -> float | None:
    return num / den if den is not None and den > 0 else None


def _rate(num: float, window_s: float) -> float:
    return num / window_s if window_s > 0 else 0.0


@dataclass(frozen=True, slots=True)
class Grouping:
    """Which stage's measured window each record belongs to (``steps.group_measured``'s rule);
    ``shape=None`` is a plain run: every record in one group."""

    shape: Shape | None
    run_start: float
    slack_s: float = EPOCH_SLACK_S  # at a window's edges, for a record whose step is set

    @property
    def groups(self) -> int:
        return len(self.shape.stages) if self.shape is not None else 1

    def of(self, step: pa.Array, intended: NDArray[np.float64]) -> NDArray[np.int64]:
        """The group of each row, -1 outside every measured window."""
        if self.shape is None:
            return np.zeros(intended.size, dtype=np.int64)
        stages = self.shape.stages
        offset = intended - self.run_start
        has_step = step.is_valid().to_numpy(zero_copy_only=False)
        given = step.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
        by_time = self.shape.stage_indices(offset).astype(np.int64)
        group = np.where(has_step, given, by_time)
        group = np.where((group >= 0) & (group < len(stages)), group, -1)
        known = group >= 0
        measured_start = np.array([st.measured_start_s for st in stages])
        end = np.array([st.end_s for st in stages])
        slack = np.where(has_step, self.slack_s, 0.0)
        at = np.where(known, group, 0)
        inside = (measured_start[at] - slack <= offset) & (offset < end[at] + slack)
        return np.where(known & inside, group, -1)

    def third(self, group: NDArray[np.int64], intended: NDArray[np.float64]) -> NDArray[np.int64]:
        """``2·stage`` (first third of its measured window), ``2·stage + 1`` (last third), or
        -1: ``selfcheck.lateness_growth_ms``'s windows."""
        if self.shape is None:
            return np.full(group.size, -1, dtype=np.int64)
        stages = self.shape.stages
        at = np.where(group >= 0, group, 0)
        offset = intended - self.run_start
        third = np.array([st.measured_s / 3.0 for st in stages])[at]
        start = np.array([st.measured_start_s for st in stages])[at]
        end = np.array([st.end_s for st in stages])[at]
        first = (third > 0) & (start <= offset) & (offset < start + third)
        last = (third > 0) & ~first & (end - third <= offset) & (offset < end)
        out = np.where(first, 2 * group, np.where(last, 2 * group + 1, -1))
        return np.where(group >= 0, out, -1)


def np_of(column: pa.Array, fill: float | int | bool, dtype: Any) -> NDArray[Any]:
    return np.asarray(column.fill_null(fill).to_numpy(zero_copy_only=False), dtype=dtype)


def valid(column: pa.Array) -> NDArray[np.bool_]:
    return np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _good(batch: pa.RecordBatch, ok: NDArray[np.bool_], slo: RequestSlo) -> NDArray[np.bool_]:
    """``slo_ok`` as ``RequestSlo.apply`` would set it, else as recorded, else ``ok``."""
    if slo.empty:
        recorded = batch.column("slo_ok")
        return np.where(valid(recorded), np_of(recorded, False, bool), ok)
    meets = ok.copy()
    for name, limit in slo.limits().items():
        column = batch.column(name)
        present = valid(column)
        value = np_of(column, 0.0, np.float64)
        fails = (present & (value > limit)) | (~present if name != "tpot_ms" else False)
        meets &= ~fails
    return meets


class _Scanner:
    """One pass over the batches: the additive figures, and the percentile metrics' values."""

    def __init__(self, grouping: Grouping, slo: RequestSlo) -> None:
        self.grouping = grouping
        self.slo = slo
        self.counts = [_Counts() for _ in range(grouping.groups)]
        self.sessions: list[RequestRecord] = []
        self.stamp_max: list[float | None] = [None] * grouping.groups

    def values(
        self, batch: pa.RecordBatch, needed: frozenset[str], *, count: bool
    ) -> GroupedValues:
        g_all = self.grouping.of(
            batch.column("step"), np_of(batch.column("intended_start"), 0.0, np.float64)
        )
        keep = g_all >= 0
        if not keep.any():
            return {}
        batch = batch.filter(pa.array(keep))
        group = g_all[keep]
        intended = np_of(batch.column("intended_start"), 0.0, np.float64)
        ok = np_of(batch.column("ok"), False, bool)
        attempts = np_of(batch.column("attempts"), 0, np.int64)
        sent = attempts > 0
        out: dict[str, Values] = {}
        for name in needed & {*OK_METRICS, "reasoning_tokens"}:
            out[name] = self._pick(batch.column(name), group, ok)
        for name in needed.intersection(SENT_METRICS):
            out[name] = self._pick(batch.column(name), group, sent)
        if "lateness_thirds" in needed:
            third = self.grouping.third(group, intended)
            in_third = sent & (third >= 0)
            lateness = np_of(batch.column("lateness_ms"), 0.0, np.float64)
            out["lateness_thirds"] = (third[in_third], lateness[in_third])
        gaps = needed.intersection(GAP_METRICS)
        if gaps:
            out.update(self._gaps(batch, group, ok, gaps))
        if count:
            self._count(batch, group, ok, sent, attempts)
        return out

    @staticmethod
    def _pick(column: pa.Array, group: NDArray[np.int64], rows: NDArray[np.bool_]) -> Values:
        mask = rows & valid(column)
        return group[mask], np_of(column, 0.0, np.float64)[mask]

    @staticmethod
    def _gaps(
        batch: pa.RecordBatch,
        group: NDArray[np.int64],
        ok: NDArray[np.bool_],
        wanted: frozenset[str] = frozenset(GAP_METRICS),
    ) -> dict[str, Values]:
        """ITL (coalesced gaps left out), and the reasoning and answer phases' gaps (those of
        them ``wanted``: flattening the gaps is the scan's largest cost)."""
        coalesced = pc.list_value_length(batch.column("coalesced_events")).fill_null(0)
        reasoning = np_of(batch.column("reasoning_events"), 0, np.int64)
        has_coalesced = ok & (np.asarray(coalesced.to_numpy(zero_copy_only=False)) > 0)
        has_reasoning = ok & (reasoning > 0)
        plain_itl = ok & ~has_coalesced
        plain_answer = ok & ~has_reasoning
        itl = batch.column("itl_ms")
        nothing = (np.empty(0, np.int64), np.empty(0, np.float64))
        out = {
            "itl_ms": _flatten(itl, group, plain_itl) if "itl_ms" in wanted else nothing,
            "answer_itl_ms": (
                _flatten(itl, group, plain_answer) if "answer_itl_ms" in wanted else nothing
            ),
            "reasoning_itl_ms": nothing,
        }
        special = has_coalesced | has_reasoning
        if special.any():
            rows = batch.filter(pa.array(special))
            owners = group[special]
            extra: dict[str, tuple[list[int], list[float]]] = {n: ([], []) for n in GAP_METRICS}
            for owner, record, coal, reas in zip(
                owners.tolist(),
                _rebuilt(rows),
                has_coalesced[special].tolist(),
                has_reasoning[special].tolist(),
                strict=True,
            ):
                if coal:
                    gaps = record.measured_itl()
                    extra["itl_ms"][0].extend([owner] * len(gaps))
                    extra["itl_ms"][1].extend(gaps)
                if reas:
                    thoughts, said = phase_itls(record)
                    for name, values in (("reasoning_itl_ms", thoughts), ("answer_itl_ms", said)):
                        extra[name][0].extend([owner] * len(values))
                        extra[name][1].extend(values)
            for name, (owners_, values_) in extra.items():
                if values_ and name in wanted:
                    g0, v0 = out[name]
                    out[name] = (
                        np.concatenate([g0, np.asarray(owners_, dtype=np.int64)]),
                        np.concatenate([v0, np.asarray(values_, dtype=np.float64)]),
                    )
        return out

    def _count(
        self,
        batch: pa.RecordBatch,
        group: NDArray[np.int64],
        ok: NDArray[np.bool_],
        sent: NDArray[np.bool_],
        attempts: NDArray[np.int64],
    ) -> None:
        size = self.grouping.groups
        kind = batch.column("error_kind")
        unfinished = ~ok & np_of(pc.equal(kind, UNFINISHED), False, bool)
        failed = ~ok & ~unfinished
        good = _good(batch, ok, self.slo)
        turn = batch.column("turn")
        accounted = ~valid(turn) | (np_of(turn, 0, np.int64) <= 1)
        prompt_col = batch.column("prompt_tokens")
        prompt = np_of(prompt_col, 0, np.int64)
        requested_col = batch.column("requested_prompt_tokens")
        requested = sent & valid(requested_col)
        served = sent & valid(prompt_col)
        cached_col = batch.column("cached_tokens")
        cached = np_of(cached_col, 0, np.int64)
        reported = valid(cached_col) & (prompt != 0)
        bound_col = batch.column("stamp_error_ms")
        bounded = ok & valid(bound_col)
        bound = np_of(bound_col, 0.0, np.float64)

        def per(weights: NDArray[Any]) -> list[int]:
            counts = np.bincount(group, weights=weights, minlength=size).astype(np.int64)
            return [int(v) for v in counts]

        columns = {
            "n": per(np.ones(group.size)),
            "ok": per(ok),
            "sent": per(sent),
            "attempts": per(attempts),
            "good": per(good),
            "tokens": per(np_of(batch.column("output_tokens"), 0, np.int64)),
            "failed": per(failed),
            "unfinished": per(unfinished),
            "accounted": per(accounted),
            "stamps_uncertain": per(bounded & (bound > STAMP_BOUND_MS)),
            "stamps_unbounded": per(ok & ~valid(bound_col)),
            "reported": per(reported),
            "prompt": per(np.where(reported, prompt, 0)),
            "cached": per(np.where(reported, cached, 0)),
            "hits": per(reported & (cached > 0)),
            "requested_n": per(requested),
            "requested_sum": per(np.where(requested, np_of(requested_col, 0, np.int64), 0)),
            "served_n": per(served),
            "served_sum": per(np.where(served, prompt, 0)),
        }
        for name, values in columns.items():
            for index, value in enumerate(values):
                setattr(self.counts[index], name, getattr(self.counts[index], name) + value)
        for index in np.unique(group[bounded]).tolist():
            top = float(bound[bounded & (group == index)].max())
            now = self.stamp_max[index]
            self.stamp_max[index] = top if now is None else max(now, top)
        if failed.any():
            status = batch.column("status").to_pylist()
            kinds = kind.to_pylist()
            for index in np.flatnonzero(failed).tolist():
                counts = self.counts[int(group[index])]
                label = kinds[index] or "unknown"
                counts.errors[str(status[index]) if status[index] is not None else label] += 1
                counts.kinds[label] += 1
        coalesced = np_of(pc.list_value_length(batch.column("coalesced_events")), 0, np.int64)
        special = ok & (coalesced > 0)
        if special.any():
            for owner, record in zip(
                group[special].tolist(), _rebuilt(batch.filter(pa.array(special))), strict=True
            ):
                self.counts[owner].itl_coalesced += len(record.itl_ms) - len(record.measured_itl())
        if valid(turn).any():
            self.sessions.extend(_rebuilt(batch.filter(turn.is_valid())))


def _rebuilt(batch: pa.RecordBatch) -> Iterator[RequestRecord]:
    """Rows as records, from the columns read: the rest take their defaults and the identity
    fields a summary never reads are blank (these records are its scratch, never written)."""
    for row in dicts_of(batch):
        row.setdefault("request_id", "")
        row.setdefault("worker", "")
        row.setdefault("actual_start", row["intended_start"])
        yield record_from_dict(row)


def _flatten(column: pa.Array, group: NDArray[np.int64], rows: NDArray[np.bool_]) -> Values:
    chosen = column.filter(pa.array(rows))
    values = np.asarray(pc.list_flatten(chosen).to_numpy(zero_copy_only=False), dtype=np.float64)
    parents = np.asarray(pc.list_parent_indices(chosen).to_numpy(zero_copy_only=False))
    return group[rows][parents].astype(np.int64), values


def columns_for(metrics: frozenset[str]) -> list[str]:
    """The columns a later scan reads: what places a record and what the metrics need."""
    columns = ["step", "intended_start", "ok", "attempts"]
    for metric in sorted(metrics):
        if metric in GAP_METRICS:
            columns += ["itl_ms", "coalesced_events", "reasoning_events", "tokens_per_event"]
        elif metric == "lateness_thirds":
            columns.append("lateness_ms")
        else:
            columns.append(metric)
    return [c for c in COLUMNS if c in columns]


def scan_run(batches: Batches, grouping: Grouping, slo: RequestSlo) -> RunColumns:
    """The figures of every stage and of the whole run, from ``batches(COLUMNS)`` (called once
    per scan: a file is read again, never held)."""
    scanner = _Scanner(grouping, slo)
    passes = 0
    size = grouping.groups

    def scan(needed: frozenset[str]) -> Iterator[GroupedValues]:
        nonlocal passes
        first = passes == 0
        passes += 1
        for batch in batches(COLUMNS if first else columns_for(needed)):
            yield scanner.values(batch, needed, count=first)

    reasoning, coalesced = _special_rows(batches)
    # Without reasoning every gap is an answer gap, and without coalesced events too the answer
    # gaps are the ITL's: one selection serves both (the largest metric, selected once).
    gaps = ["itl_ms"]
    if reasoning:
        gaps += ["reasoning_itl_ms", "answer_itl_ms"]
    elif coalesced:
        gaps.append("answer_itl_ms")
    metrics = dict.fromkeys((*OK_METRICS, *SENT_METRICS, *gaps, "reasoning_tokens"), size)
    metrics["lateness_thirds"] = 2 * size
    exact = exact_percentiles(scan, metrics)
    empty = [Exact() for _ in range(size + 1)]
    exact.setdefault("reasoning_itl_ms", empty)
    exact.setdefault("answer_itl_ms", exact["itl_ms"])
    total = _Counts()
    for c in scanner.counts:
        total.add(c)
    known = [m for m in scanner.stamp_max if m is not None]
    thirds = exact.pop("lateness_thirds")
    growth: list[float | None] = []
    for index in range(size):
        first, last = thirds[2 * index], thirds[2 * index + 1]
        if grouping.shape is None or first.count < MIN_THIRD or last.count < MIN_THIRD:
            growth.append(None)
            continue
        p_first, p_last = first.percentiles(), last.percentiles()
        assert p_first is not None
        assert p_last is not None
        growth.append(float(np.float64(p_last[0]) - np.float64(p_first[0])))
    return RunColumns(
        counts=scanner.counts,
        total=total,
        exact=exact,
        lateness_growth_ms=growth,
        session_records=scanner.sessions,
        stamp_error_max_ms=[*scanner.stamp_max, max(known) if known else None],
    )


def _special_rows(batches: Batches) -> tuple[bool, bool]:
    """Whether any successful record has reasoning events, and any has coalesced events."""
    reasoning = coalesced = False
    for batch in batches(["ok", "reasoning_events", "coalesced_events"]):
        ok = np_of(batch.column("ok"), False, bool)
        events = np_of(batch.column("reasoning_events"), 0, np.int64)
        lengths = pc.list_value_length(batch.column("coalesced_events"))
        reasoning = reasoning or bool((ok & (events > 0)).any())
        coalesced = coalesced or bool((ok & (np_of(lengths, 0, np.int64) > 0)).any())
    return reasoning, coalesced


def in_memory(records: Sequence[RequestRecord]) -> Batches:
    """``batches`` over records already in memory (a summary of a few records, tests)."""
    table = batch_of(list(records)) if records else None

    def batches(columns: list[str]) -> Iterable[pa.RecordBatch]:
        return [table.select(columns)] if table is not None else []

    return batches


def outcomes(
    batches: Batches, slo: RequestSlo, *, use_goodput: bool
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """Every record's intended start and whether it succeeded (or met the SLOs): what the
    outage recovery rule reads (``steps.recovery_from``). Two numbers a record."""
    starts: list[NDArray[np.float64]] = []
    goods: list[NDArray[np.bool_]] = []
    for batch in batches(COLUMNS):
        ok = np_of(batch.column("ok"), False, bool)
        starts.append(np_of(batch.column("intended_start"), 0.0, np.float64))
        goods.append(_good(batch, ok, slo) if use_goodput else ok)
    if not starts:
        return np.empty(0, np.float64), np.empty(0, bool)
    return np.concatenate(starts), np.concatenate(goods)


def measured_itl(batch: pa.RecordBatch, ok: NDArray[np.bool_]) -> NDArray[np.float64]:
    """The gaps the ITL figures pool (``RequestRecord.measured_itl``) of the ``ok`` rows."""
    rows = np.zeros(batch.num_rows, dtype=np.int64)
    return _Scanner._gaps(batch, rows, ok, frozenset(["itl_ms"]))["itl_ms"][1]
