"""The one producer of a ``RunSummary``: the records plus the run's facts, nothing else.

Three callers, one code path: the ramp master (``MasterEngine.summary``: the engine's facts),
a plain Locust run without the ramp engine (no shape: one step covering every record) and the
CLI when it rebuilds a summary the master could not write (``stack.rebuild.rebuild_summary``: the
facts from the saved campaign and ``progress.json``). The same records and facts give the
same summary whoever asks. The producer also applies the per-request SLO (``slo_ok``) and
evaluates the run's gates, so the verdicts are written into ``summary.json`` once.

``dropped`` is counted in every mode. Open loop: arrivals of the schedule in a stage's measured
window that no free user could take (the workers' pacers count them). Closed loop and a plain
run: 0 — a user sends its next request when its last one ends, so there is no arrival that
could wait for a user; the engine's reports say so for the closed loop, and a plain run has no
engine. ``None`` only when the counts were lost (a rebuilt summary without them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.compute as pc

from ramplab.load.arrivals.schedule import make_process, schedule_chunks
from ramplab.load.outage import RECOVERY_THRESHOLD, RECOVERY_WINDOW_S, Outage
from ramplab.load.plan import Mode
from ramplab.load.shapes import Shape, Stage
from ramplab.measure.record import RequestRecord
from ramplab.records.files import RecordFiles
from ramplab.results.columnar import (
    Batches,
    Grouping,
    RunColumns,
    in_memory,
    outcomes,
    scan_run,
)
from ramplab.results.conservation import incomplete_reasons
from ramplab.results.engine import EngineSample, read_samples, run_totals, window_figures
from ramplab.results.selfcheck import judge
from ramplab.results.sessions import sessions_summary
from ramplab.results.slo import Gate, RequestSlo, evaluate_gates
from ramplab.results.steps import count_measured, recovery_from
from ramplab.results.summary import (
    ClockOffset,
    OutageSummary,
    RunSummary,
    StepStats,
    WorkerCounts,
    WorkerHealth,
)
from ramplab.results.trust import judge_stamps

__all__ = ["EngineCounts", "OutageFacts", "RunFacts", "scheduled_counts", "summarize"]

Epochs = Sequence[tuple[float, Sequence[str]]]


@dataclass(frozen=True, slots=True)
class EngineCounts:
    """Per stage, what the workers' pacers reported (measured windows only)."""

    dispatched: Sequence[int]
    dropped: Sequence[int]
    by_worker: Sequence[Mapping[str, WorkerCounts]] = ()
    peak_users: Sequence[int] | None = None  # Σ the workers' peak users; None: none reported

    @classmethod
    def from_reports(cls, reports: Mapping[str, Mapping[str, Any]], stages: int) -> EngineCounts:
        """Summed over the workers' last progress reports (``{"dispatched": [...], "dropped":
        [...]}`` per worker; empty lists from a worker that reported before it had the plan)."""
        dispatched = [0] * stages
        dropped = [0] * stages
        by_worker: list[dict[str, WorkerCounts]] = [{} for _ in range(stages)]
        peak_users: list[int] | None = None
        for worker, report in sorted(reports.items()):
            pairs = zip(report["dispatched"], report["dropped"], strict=True)
            peaks = list(report.get("peak_users") or ())
            cap = report.get("max_users")
            for index, (sent, lost) in enumerate(pairs):
                dispatched[index] += sent
                dropped[index] += lost
                by_worker[index][worker] = WorkerCounts(
                    dispatched=sent,
                    dropped=lost,
                    peak_users=int(peaks[index]) if index < len(peaks) else None,
                    max_users=int(cap) if cap else None,
                )
            if peaks:
                peak_users = peak_users or [0] * stages
                for index, peak in enumerate(peaks[:stages]):
                    peak_users[index] += int(peak)
        return cls(dispatched, dropped, by_worker, peak_users)


@dataclass(frozen=True, slots=True)
class OutageFacts:
    outage: Outage
    end_epoch: float  # when the target's outage window ends, on our clock


@dataclass(frozen=True, slots=True)
class RunFacts:
    """What the records cannot tell: the plan, the engine's counts, the SLO and the gates.

    ``shape=None`` is a plain run (Locust's own users, no ramp engine): one step covering every
    record, starting at the first intended start.
    """

    shape: Shape | None = None
    run_start: float | None = None  # epoch seconds of the schedule's offset 0
    mode: Mode | None = None
    shape_text: str | None = None
    arrivals: str | None = None
    seed: int | None = None
    model: str | None = None  # --model; None: the first of the target's GET /v1/models
    workers: Epochs | None = None
    retry: Any = None
    slo: RequestSlo = field(default_factory=RequestSlo)
    scheduled: Sequence[int] | None = None  # open loop: the schedule's arrivals per stage
    counts: EngineCounts | None = None
    outage: OutageFacts | None = None
    gates: Sequence[Gate] = ()
    stopped_at_s: float | None = None
    rebuilt: bool = False
    corrupt_records: int = 0  # lines of requests.jsonl that were not records (skipped)
    crashed: bool = False  # rebuilt because the master wrote no summary; cut at the last record
    clocks: Mapping[str, ClockOffset] | None = None  # distributed run: each worker's offset
    health: Sequence[Mapping[str, WorkerHealth]] | None = None  # per stage: workers' self-check
    engine_metrics: Path | None = None  # the server's scrapes (``results/engine.py``), if any
    max_users: int | None = None  # --ramplab-max-users: the cap on users over all workers


def scheduled_counts(plan_shape: Shape, arrivals: str, seed: int, measured: Shape) -> list[int]:
    """Arrivals of the run's schedule (built from the whole ``plan_shape``) per stage of
    ``measured`` — the plan's shape, or its part that ran before an interruption. Counted
    chunk by chunk: the master never holds the schedule."""
    counts = [0] * len(measured.stages)
    for chunk in schedule_chunks(plan_shape, make_process(arrivals), seed):
        for index, count in enumerate(count_measured(chunk.offsets, measured)):
            counts[index] += count
    return counts


def summarize(source: Sequence[RequestRecord] | RecordFiles, facts: RunFacts) -> RunSummary:
    """The run's summary from its records: a run directory's files (read in batches, never
    held: ``columnar.py``), or records in memory, on which ``slo_ok`` is set when the facts
    carry an SLO."""
    if isinstance(source, RecordFiles):
        batches: Batches = source.batches
    else:
        if not facts.slo.empty:
            facts.slo.apply(source)
        batches = in_memory(source)
    shape, run_start = _steps_of(batches, facts)
    grouping = Grouping(shape if facts.shape is not None else None, run_start or 0.0)
    columns = scan_run(batches, grouping, facts.slo)
    n = len(shape.stages)
    counts = facts.counts
    _check_lengths(n, facts.scheduled, counts)
    dropped = _dropped(n, facts)
    samples = read_samples(facts.engine_metrics) if facts.engine_metrics is not None else []
    steps = tuple(
        _step(stage, columns, facts, index_dropped, index).model_copy(
            update={"engine": _engine(samples, stage, run_start)}
        )
        for index, (stage, index_dropped) in enumerate(zip(shape.stages, dropped, strict=True))
    )
    window = sum(st.measured_s for st in steps)
    bound = [st.generator_bound for st in steps if st.generator_bound is not None]
    total = columns.figures(
        None,
        window,
        sum(facts.scheduled) if facts.scheduled is not None else None,
        None if any(d is None for d in dropped) else sum(d or 0 for d in dropped),
    )
    summary = RunSummary(
        **total,
        measured_s=window,
        steps=steps,
        mode=facts.mode,
        shape=facts.shape_text,
        arrivals=facts.arrivals,
        seed=facts.seed,
        model=facts.model,
        run_start=run_start,
        workers=_epochs(facts.workers),
        retry=facts.retry,
        outage=_outage(batches, facts),
        sessions=sessions_summary(
            columns.session_records,
            window,
            sum(facts.scheduled) if facts.scheduled is not None else None,
        ),
        clocks=dict(facts.clocks) if facts.clocks is not None else None,
        generator_bound=any(bound) if bound else None,
        untrusted=_any([st.untrusted for st in steps]),
        slo=facts.slo.limits() or None,
        rebuilt=facts.rebuilt,
        stopped_at_s=facts.stopped_at_s,
        dispatched=_total([st.dispatched for st in steps]),
        lost=_total([st.lost for st in steps]),
        unaccounted=_total([st.unaccounted for st in steps]),
        incomplete=incomplete_reasons(
            [(st.index, st.unaccounted, st.lost) for st in steps],
            facts.stopped_at_s,
            corrupt=facts.corrupt_records,
            crashed=facts.crashed,
        ),
        corrupt_records=facts.corrupt_records,
        engine=_engine_totals(samples, batches),
    )
    if not facts.gates:
        return summary
    verdicts = evaluate_gates(facts.gates, summary.to_json())
    return summary.model_copy(update={"gates": verdicts})


def _steps_of(batches: Batches, facts: RunFacts) -> tuple[Shape, float | None]:
    if facts.shape is not None:
        return facts.shape, facts.run_start if facts.run_start is not None else 0.0
    start: float | None = None
    end: float | None = None
    for batch in batches(["intended_start", "total_ms"]):
        if batch.num_rows == 0:
            continue
        intended = batch.column("intended_start").to_numpy(zero_copy_only=False)
        total = batch.column("total_ms").fill_null(0.0).to_numpy(zero_copy_only=False)
        first, last = float(intended.min()), float((intended + total / 1000.0).max())
        start = first if start is None else min(start, first)
        end = last if end is None else max(end, last)
    if start is None or end is None:
        # A plain run that measured nothing still has its one (empty) step.
        return Shape((Stage(0, 0.0, 0.0, 0.0, 0.0),)), facts.run_start
    # A plain run measures from its first request to the end of its last: no warm-up.
    return Shape((Stage(0, 0.0, end - start, 0.0, 0.0),)), start


def _check_lengths(
    stages: int, scheduled: Sequence[int] | None, counts: EngineCounts | None
) -> None:
    for name, values in (
        ("scheduled", scheduled),
        ("dispatched", counts.dispatched if counts else None),
        ("dropped", counts.dropped if counts else None),
    ):
        if values is not None and len(values) != stages:
            raise ValueError(f"{name} has {len(values)} counts for {stages} stages")


def _dropped(stages: int, facts: RunFacts) -> list[int | None]:
    if facts.counts is not None:
        return [int(d) for d in facts.counts.dropped]
    if facts.shape is None or facts.mode == "closed":
        return [0] * stages  # nothing can be dropped: see the module docstring
    return [None] * stages


def _step(
    stage: Stage, columns: RunColumns, facts: RunFacts, dropped: int | None, index: int
) -> StepStats:
    scheduled = facts.scheduled[index] if facts.scheduled is not None else None
    counts = facts.counts
    dispatched = counts.dispatched[index] if counts is not None else None
    lost = None
    if scheduled is not None and dispatched is not None and dropped is not None:
        lost = max(0, scheduled - dispatched - dropped)
    by_worker = dict(counts.by_worker[index]) if counts and counts.by_worker else {}
    peak_users = counts.peak_users[index] if counts and counts.peak_users else None
    plain = facts.shape is None
    closed = facts.mode == "closed"
    health = dict(facts.health[index]) if facts.health is not None and not plain else None
    growth = None if plain else columns.lateness_growth_ms[index]
    bound, reason = judge(health, growth)
    figures = columns.figures(index, stage.measured_s, scheduled, dropped)
    untrusted, untrusted_reason = judge_stamps(figures, health)
    return StepStats(
        **figures,
        index=stage.index,
        start_s=stage.start_s,
        duration_s=stage.duration_s,
        warmup_s=stage.warmup_s,
        measured_s=stage.measured_s,
        # A plain run has no target; a closed loop's stage rate is its number of users.
        target_qps=None if plain or closed else stage.rate,
        target_users=stage.rate if closed else None,
        dispatched=dispatched,
        lost=lost,
        unaccounted=None if dispatched is None else dispatched - columns.accounted(index),
        by_worker=by_worker,
        peak_users=peak_users,
        max_users=facts.max_users,
        generator=health or {},
        lateness_growth_ms=growth,
        generator_bound=bound,
        generator_reason=reason,
        untrusted=untrusted,
        untrusted_reason=untrusted_reason,
    )


def _engine(
    samples: Sequence[EngineSample], stage: Stage, run_start: float | None
) -> dict[str, Any] | None:
    if not samples or run_start is None:
        return None
    start = run_start + stage.start_s + stage.warmup_s
    return window_figures(samples, start, run_start + stage.start_s + stage.duration_s)


def _engine_totals(samples: Sequence[EngineSample], batches: Batches) -> dict[str, Any] | None:
    """The server's counters over the run beside the client's own sums over every record,
    warm-ups included (the server counts them too): tokens as each answer's usage gave them."""
    totals = run_totals(samples)
    if totals is None:
        return None
    prompt = output = completed = 0
    for batch in batches(["prompt_tokens", "output_tokens", "ok"]):
        prompt += int(pc.sum(batch.column("prompt_tokens")).as_py() or 0)
        output += int(pc.sum(batch.column("output_tokens")).as_py() or 0)
        completed += int(pc.sum(batch.column("ok").cast("int64")).as_py() or 0)
    return {**totals, "client": {"prompt_tokens": prompt, "generation_tokens": output,
                                 "requests": completed}}  # fmt: skip


def _any(values: Sequence[bool | None]) -> bool | None:
    """True when any step is; ``None`` when no step could be judged."""
    known = [v for v in values if v is not None]
    return any(known) if known else None


def _total(values: Sequence[int | None]) -> int | None:
    """The sum over steps; ``None`` when any step does not know its count."""
    return None if any(v is None for v in values) else sum(v or 0 for v in values)


def _epochs(workers: Epochs | None) -> tuple[tuple[float, tuple[str, ...]], ...] | None:
    if workers is None:
        return None
    return tuple((float(start), tuple(ids)) for start, ids in workers)


def _outage(batches: Batches, facts: RunFacts) -> OutageSummary | None:
    if facts.outage is None:
        return None
    outage = facts.outage.outage
    starts, good = outcomes(batches, facts.slo, use_goodput=not facts.slo.empty)
    return OutageSummary(
        start_s=outage.start_s,
        end_s=outage.end_s,
        recovery_window_s=RECOVERY_WINDOW_S,
        recovery_threshold=RECOVERY_THRESHOLD,
        recovery_s=recovery_from(
            starts,
            good,
            facts.outage.end_epoch,
            window_s=RECOVERY_WINDOW_S,
            threshold=RECOVERY_THRESHOLD,
        ),
    )
