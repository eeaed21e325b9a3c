"""The typed run summary: ``summary.json`` is ``RunSummary.to_json()``, read back by ``from_json``.

::

    RunSummary          the run: its facts, the totals over every measured window, the gates
    ├── steps: StepStats        one per load stage (a plain run: one step covering the run)
    │   ├── by_worker: WorkerCounts
    │   ├── generator: WorkerHealth  each worker's self-check (``results/selfcheck.py``)
    │   └── ttft_ms, ...: Percentiles
    ├── outage: OutageSummary   with --ramplab-outage
    ├── sessions: SessionsSummary   multi-turn sessions (--session-turns > 1)
    │   └── turns: TurnStats        TTFT and prompt length by turn
    ├── clocks: ClockOffset     per worker of a distributed run (``ramplab/plugin/clock_sync.py``)
    └── gates: GateVerdict      every gate of the run, evaluated once by the producer

``Figures`` holds what a step and the whole run share (counts, rates, ratios, latencies), so a
gate reads ``ttft_ms.p99`` and ``steps[-1].ttft_ms.p99`` the same way. Every field is
documented in ``docs/summary.md`` (a test keeps the two equal). Pydantic rather than
dataclasses: the loader validates a file written by an older or foreign process and names the
field that does not fit.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from ramplab.errors import StorageError, UsageError

__all__ = [
    "ClockOffset",
    "Figures",
    "GateStatus",
    "GateVerdict",
    "OutageSummary",
    "Percentiles",
    "RunSummary",
    "SessionsSummary",
    "StepStats",
    "TurnStats",
    "WorkerCounts",
    "WorkerHealth",
]

GateStatus = Literal["pass", "fail", "invalid", "untrusted"]
# What a gate can observe at the end of its path: a number, no data, or (a typo) anything else.
Observed = int | float | str | bool | None


class _Frozen(BaseModel):
    # Unknown keys are ignored so a summary written by a newer ramplab still loads.
    model_config = ConfigDict(frozen=True, extra="ignore")


class Percentiles(_Frozen):
    """Exact percentiles (numpy, linear interpolation) of ``count`` values, with their mean and
    extremes; ``None`` when empty. ``p999`` is the 99.9th percentile (a dot would split a gate's
    path)."""

    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    p999: float | None = None
    min: float | None = None
    max: float | None = None
    mean: float | None = None
    count: int = 0


class WorkerCounts(_Frozen):
    """One worker's arrivals in one stage's measured window, and its users there."""

    dispatched: int
    dropped: int
    # The most users it ran in the window, and its share of the cap; ``None`` from a worker
    # that did not report them (older summaries load).
    peak_users: int | None = None
    max_users: int | None = None


class WorkerHealth(_Frozen):
    """One worker's self-check over one stage's measured window: its process CPU (share of one
    core, per 0.5 s window) and its event loop's lag (a 100 ms timer's lateness); ``None`` when
    no sample fell in the window."""

    samples: int
    cpu_max: float | None
    cpu_mean: float | None
    loop_lag_max_ms: float | None
    loop_lag_mean_ms: float | None
    # CPU + run-queue wait of the loop thread; None where /proc/thread-self cannot be read.
    busy_max: float | None = None
    busy_mean: float | None = None


class Figures(_Frozen):
    """The measured figures of a set of records over a window: one step, or the whole run."""

    scheduled: int | None
    dropped: int | None
    requests: int
    ok: int
    attempts: int
    # The conservation law's terms (``results/conservation.py``); defaults so older summaries load.
    completed: int = 0
    failed: int = 0
    unfinished: int = 0
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
    errors: dict[str, int]
    error_kinds: dict[str, int]
    ttft_ms: Percentiles
    ttft_send_ms: Percentiles
    itl_ms: Percentiles
    tpot_ms: Percentiles
    ttlt_ms: Percentiles
    ttfb_ms: Percentiles
    lateness_ms: Percentiles
    # Reasoning phases and prefix-cache hits (``results/workload.py``); defaults so that
    # summaries written before them still load.
    answer_ttft_ms: Percentiles = Percentiles()
    reasoning_itl_ms: Percentiles = Percentiles()
    answer_itl_ms: Percentiles = Percentiles()
    reasoning_tokens: Percentiles = Percentiles()
    cached_tokens_ratio: float | None = None
    prefix_hit_ratio: float | None = None
    # Mean prompt tokens asked for and reported by the server (``results/server_figures.py``).
    prompt_tokens_requested: float | None = None
    prompt_tokens_served: float | None = None
    # How exact the stamps were (``results/trust.py``); defaults so older summaries load.
    itl_coalesced: int = 0
    stamps_uncertain: int = 0
    stamps_unbounded: int = 0
    stamp_error_max_ms: float | None = None


class StepStats(Figures):
    """One load stage: where it lies in the run, what it asked for, and its figures."""

    index: int
    start_s: float
    duration_s: float
    warmup_s: float
    measured_s: float
    target_qps: float | None
    target_users: float | None
    dispatched: int | None
    lost: int | None
    by_worker: dict[str, WorkerCounts]
    # Σ the workers' peak users in the window, and the run's cap (what limited dropped arrivals).
    peak_users: int | None = None
    max_users: int | None = None
    # dispatched − the requests recorded for them (0 when every request has its record).
    unaccounted: int | None = None
    # The generator self-check (``results/selfcheck.py``); defaults so older summaries load.
    generator: dict[str, WorkerHealth] = {}
    lateness_growth_ms: float | None = None
    generator_bound: bool | None = None
    generator_reason: str | None = None
    # Whether the step's timing tails can be trusted to ±1 ms (``results/trust.py``).
    untrusted: bool | None = None
    untrusted_reason: str | None = None
    # The server's own Prometheus figures over the step's window (``results/engine.py``);
    # None when the run scraped none.
    engine: dict[str, Any] | None = None


class OutageSummary(_Frozen):
    """The target outage the run scheduled, and how long the run took to recover from it."""

    start_s: float
    end_s: float
    recovery_window_s: float
    recovery_threshold: float
    recovery_s: float | None


class TurnStats(_Frozen):
    """The requests of one turn index across the run's sessions (1 = each session's first)."""

    turn: int
    requests: int
    ok: int
    ttft_ms: Percentiles
    prompt_tokens: Percentiles
    cached_tokens: Percentiles


class SessionsSummary(_Frozen):
    """Multi-turn sessions: the rate of sessions (the schedule's arrivals) and each turn's TTFT."""

    sessions: int
    offered_sessions_per_s: float | None
    achieved_sessions_per_s: float
    turns: tuple[TurnStats, ...]


class ClockOffset(_Frozen):
    """A worker's wall clock minus the master's: the true offset lies within
    ``offset_ms ± uncertainty_ms`` (half the narrowest probe's round trip)."""

    offset_ms: float
    uncertainty_ms: float
    samples: int


class GateVerdict(_Frozen):
    """One gate's outcome: ``observed`` holds (resolved path, value), several for ``steps[*]``."""

    gate: str
    status: GateStatus
    observed: tuple[tuple[str, Observed], ...] = ()
    detail: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "pass"


class RunSummary(Figures):
    """The whole run: ``Figures`` over every measured window, its steps, facts and verdicts."""

    measured_s: float
    steps: tuple[StepStats, ...]
    mode: Literal["open", "closed"] | None = None
    shape: str | None = None
    arrivals: str | None = None
    seed: int | None = None
    model: str | None = None  # as the run asked (--model); None: the target's first
    run_start: float | None = None
    workers: tuple[tuple[float, tuple[str, ...]], ...] | None = None
    retry: Any = None
    outage: OutageSummary | None = None
    sessions: SessionsSummary | None = None
    clocks: dict[str, ClockOffset] | None = None
    gates: tuple[GateVerdict, ...] = ()
    generator_bound: bool | None = None
    untrusted: bool | None = None  # any step's timing tails untrusted (``results/trust.py``)
    # The per-request SLO the run judged goodput by (ms per figure); None: none was set.
    slo: dict[str, float] | None = None
    rebuilt: bool = False
    stopped_at_s: float | None = None
    # The conservation law over the whole run, and why the run is incomplete (empty: complete).
    dispatched: int | None = None
    lost: int | None = None
    unaccounted: int | None = None
    incomplete: tuple[str, ...] = ()
    corrupt_records: int = 0  # lines of requests.jsonl skipped as not records
    # The server's counters over the whole run (``results/engine.py``): held against the
    # client's own token and request counts.
    engine: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The ``summary.json`` form (plain JSON values; what gates are evaluated on)."""
        return self.model_dump(mode="json")

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str = "the summary") -> RunSummary:
        """Validate a ``summary.json`` mapping; ``UsageError`` names the field that does not fit."""
        try:
            return cls.model_validate(dict(data))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise UsageError(f"{source}: {where}", first["msg"]) from None

    @classmethod
    def read(cls, path: Path) -> RunSummary:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UsageError(str(path), f"cannot read a summary: {exc}") from None
        if not isinstance(data, Mapping):
            raise UsageError(str(path), "expected a JSON object")
        return cls.from_json(data, str(path))

    def write(self, path: Path) -> None:
        tmp = path.with_suffix(".json.tmp")
        try:
            tmp.write_text(json.dumps(self.to_json(), indent=2) + "\n", encoding="utf-8")
            os.replace(tmp, path)  # a reader never sees half a summary
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise StorageError.of(exc, path) from None
