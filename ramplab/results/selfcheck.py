"""The generator's self-check: was the load generator itself the bottleneck of a step?

Each worker samples itself (``ramplab/plugin/worker.py``): every ``TICK_S`` a gevent timer
measures how late the hub woke it (the event loop's lag), and every ``CPU_WINDOW_S`` the
process's CPU time (``time.process_time()``: user + system of every thread, what
``/proc/PID/stat`` fields 14 and 15 count, at nanosecond rather than 10 ms resolution) over the
wall time since the last one (a share of one core). ``HealthAccumulator`` files the samples by
stage, measured windows only, and the worker sends its totals with every progress report.

The rule (``docs/summary.md`` quotes it) — a step is ``generator_bound`` when either holds:

- **CPU**: a worker's mean CPU over the step's measured window (the mean of its 0.5 s windows)
  exceeds ``CPU_LIMIT`` (0.90) of one core — Locust's own warning level, and the search's
  ``max_generator_cpu_pct`` default — or so does its event loop's **busy** share: the loop
  thread's time on a CPU *plus waiting in the run queue for one* (``/proc/thread-self/
  schedstat``) ÷ wall time. On a machine shared with other processes a worker that never idles
  may get only half a core: its CPU reads 50 %, yet it is the bottleneck; busy reads ~100 %.
  The mean, not the max: one 0.5 s window at a full core (a garbage collection) does not make
  the step's timings wrong; the maxima are reported beside it.
- **Lateness growing**: the p50 of ``lateness_ms`` of the requests sent in the last third of the
  measured window (by intended start) exceeds that of the first third by more than
  ``LATENESS_GROWTH_MS`` (20 ms, the search's ``lateness_growth_ms``), each third holding at
  least ``MIN_THIRD`` sent requests. A generator that keeps up has a flat lateness; one that
  falls behind is later with every arrival.

``None`` — not ``False`` — when the step has no self-check sample (a plain Locust run without the
ramp engine, a summary rebuilt without the workers' reports): a guess would be worse.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ramplab.load.shapes import Shape, Stage
from ramplab.measure.record import RequestRecord
from ramplab.results.summary import GateVerdict, RunSummary, WorkerHealth

__all__ = [
    "CPU_LIMIT",
    "LATENESS_GROWTH_MS",
    "HealthAccumulator",
    "distrust",
    "flagged_steps",
    "generator_warning",
    "health_from_reports",
    "judge",
    "lateness_growth_ms",
    "untrust_passes",
]

TICK_S = 0.1
CPU_WINDOW_S = 0.5
CPU_LIMIT = 0.90
LATENESS_GROWTH_MS = 20.0
MIN_THIRD = 5


class HealthAccumulator:
    """One worker's samples, summed per stage over the measured windows (run offsets)."""

    def __init__(self, shape: Shape) -> None:
        self.shape = shape
        n = len(shape.stages)
        self.cpu = [[0, 0.0, 0.0] for _ in range(n)]  # count, sum, max
        self.lag = [[0, 0.0, 0.0] for _ in range(n)]
        self.busy = [[0, 0.0, 0.0] for _ in range(n)]

    def _stage(self, offset_s: float) -> Stage | None:
        stage = self.shape.stage_at(offset_s)
        return stage if stage is not None and stage.in_measured(offset_s) else None

    @staticmethod
    def _add(slot: list[Any], value: float) -> None:
        slot[0] += 1
        slot[1] += value
        slot[2] = max(slot[2], value)

    def add_cpu(self, offset_s: float, share: float) -> None:
        stage = self._stage(offset_s)
        if stage is not None:
            self._add(self.cpu[stage.index], share)

    def add_busy(self, offset_s: float, share: float) -> None:
        stage = self._stage(offset_s)
        if stage is not None:
            self._add(self.busy[stage.index], share)

    def add_lag(self, offset_s: float, lag_ms: float) -> None:
        stage = self._stage(offset_s)
        if stage is not None:
            self._add(self.lag[stage.index], lag_ms)

    def report(self) -> list[list[float]]:
        """Per stage ``[cpu n, sum, max, lag n, sum ms, max ms, busy n, sum, max]``
        (msgpack-able)."""
        return [[*c, *g, *b] for c, g, b in zip(self.cpu, self.lag, self.busy, strict=True)]


def loop_thread_ns(path: Path = Path("/proc/thread-self/schedstat")) -> int | None:
    """Nanoseconds the calling thread (the event loop's) spent on a CPU plus waiting for one in
    the run queue (``/proc/thread-self/schedstat``, fields 1 and 2); ``None`` where unreadable."""
    try:
        fields = path.read_text().split()
        return int(fields[0]) + int(fields[1])
    except (OSError, IndexError, ValueError):
        return None


def _health(row: Sequence[float]) -> WorkerHealth:
    cpu_n, cpu_sum, cpu_max, lag_n, lag_sum, lag_max = row[:6]
    busy_n, busy_sum, busy_max = row[6:9] if len(row) >= 9 else (0, 0.0, 0.0)
    return WorkerHealth(
        busy_max=float(busy_max) if busy_n else None,
        busy_mean=float(busy_sum) / busy_n if busy_n else None,
        samples=int(lag_n),
        cpu_max=float(cpu_max) if cpu_n else None,
        cpu_mean=float(cpu_sum) / cpu_n if cpu_n else None,
        loop_lag_max_ms=float(lag_max) if lag_n else None,
        loop_lag_mean_ms=float(lag_sum) / lag_n if lag_n else None,
    )


def health_from_reports(
    reports: Mapping[str, Mapping[str, Any]], stages: int
) -> list[dict[str, WorkerHealth]] | None:
    """Per stage, each worker's self-check from its last progress report; ``None`` when no
    worker sent one (an engine without self-check)."""
    out: list[dict[str, WorkerHealth]] = [{} for _ in range(stages)]
    seen = False
    for worker, report in sorted(reports.items()):
        rows = report.get("health") or ()
        for index, row in enumerate(rows[:stages]):
            seen = True
            if any(row[i] for i in (0, 3, 6) if i < len(row)):  # any sample counted
                out[index][worker] = _health(row)
    return out if seen else None


def lateness_growth_ms(
    records: Sequence[RequestRecord], stage: Stage, run_start: float
) -> float | None:
    """p50 lateness of the last third of the measured window minus that of the first third
    (sent requests, by intended start); ``None`` when a third has fewer than ``MIN_THIRD``."""
    third = stage.measured_s / 3.0
    if third <= 0:
        return None
    start = stage.measured_start_s
    first: list[float] = []
    last: list[float] = []
    for r in records:
        if r.attempts <= 0:
            continue
        at = r.intended_start - run_start
        if start <= at < start + third:
            first.append(r.lateness_ms)
        elif stage.end_s - third <= at < stage.end_s:
            last.append(r.lateness_ms)
    if len(first) < MIN_THIRD or len(last) < MIN_THIRD:
        return None
    return float(np.percentile(last, 50) - np.percentile(first, 50))


def judge(
    health: Mapping[str, WorkerHealth] | None, growth_ms: float | None
) -> tuple[bool | None, str | None]:
    """``(generator_bound, reason)`` of one step by the rule above; ``(None, None)`` without
    self-check samples."""
    if not health:
        return None, None
    reasons = []
    for worker, h in sorted(health.items()):
        if h.cpu_mean is not None and h.cpu_mean > CPU_LIMIT:
            reasons.append(f"worker {worker}: CPU {h.cpu_mean:.1%} of a core (mean; limit "
                           f"{CPU_LIMIT:.0%})")  # fmt: skip
        elif h.busy_mean is not None and h.busy_mean > CPU_LIMIT:
            reasons.append(f"worker {worker}: event loop runnable {h.busy_mean:.1%} of the time "
                           f"(CPU {h.cpu_mean or 0:.0%}, the rest waiting for a CPU; mean; limit "
                           f"{CPU_LIMIT:.0%})")  # fmt: skip
    if growth_ms is not None and growth_ms > LATENESS_GROWTH_MS:
        reasons.append(
            f"lateness p50 grew {growth_ms:.0f} ms through the step (limit {LATENESS_GROWTH_MS:g})"
        )
    return (True, "; ".join(reasons)) if reasons else (False, None)


def untrust_passes(
    verdicts: Sequence[GateVerdict],
    summary: Mapping[str, Any],
    flag: str,
    reason: str,
    label: str,
    applies: Callable[[GateVerdict], bool] = lambda _: True,
) -> tuple[GateVerdict, ...]:
    """When the run's ``flag`` is true (``summary`` in its ``summary.json`` form), every passed
    gate ``applies`` picks becomes ``untrusted``, its detail the flagged steps' ``reason``
    fields; fail and invalid stay."""
    if summary.get(flag) is not True:
        return tuple(verdicts)
    steps = summary.get("steps") or ()
    detail = f"{label}: " + "; ".join(
        f"step {st.get('index')}: {st.get(reason)}"
        for st in steps
        if isinstance(st, Mapping) and st.get(flag) is True
    )
    return tuple(
        v.model_copy(update={"status": "untrusted", "detail": detail})
        if v.status == "pass" and applies(v)
        else v
        for v in verdicts
    )


def distrust(
    verdicts: Sequence[GateVerdict], summary: Mapping[str, Any]
) -> tuple[GateVerdict, ...]:
    """Gates of a generator-bound run: a pass becomes ``untrusted`` (the figures it passed on
    measured the generator)."""
    return untrust_passes(
        verdicts, summary, "generator_bound", "generator_reason", "generator-bound"
    )


def flagged_steps(summary: RunSummary, flag: str, reason: str) -> str:
    """``step 3: <reason>; step 5: <reason>`` over the steps whose ``flag`` is true."""
    return "; ".join(
        f"step {st.index}: {getattr(st, reason)}" for st in summary.steps if getattr(st, flag)
    )


def generator_warning(summary: RunSummary) -> str | None:
    """The report's (and the console's) one-line warning for a generator-bound run, else None."""
    if not summary.generator_bound:
        return None
    steps = flagged_steps(summary, "generator_bound", "generator_reason")
    return (
        f"WARNING: the load generator was the bottleneck ({steps}). Those figures measured the "
        "generator, not the target; gates are untrusted and the run exits 4. Add workers or "
        "lower the load."
    )
