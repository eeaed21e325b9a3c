"""Per-step figures of one variant for the decay study, from its runs' records.

**Per-stream tokens/s** (the study's "token generation rate"): for each successful stream, the
tokens that arrived while it streamed ÷ how long it streamed — ``(output_tokens − n₁) ÷ (TTLT −
TTFT)``, ``n₁`` the tokens of the first content event — i.e. first → last content event, the
decode as the client saw it. Queueing and prefill come before the first token and are left out;
the reference target signs *before the last token* (``target_service/generation.py``), so a
signature's lock wait is inside. A step's figure is the **median** over its streams (p10 too:
the slowest tenth). The report's ``stream_rate`` divides by TTLT from the send instead, which
mixes queueing into the rate; this study wants the decode alone.

**Server phases**: each stream's ``server_timing_ms`` (the target's own ``auth``, ``ratelimit``,
``queue``, ``prefill``, ``decode``, ``sign_queue``, ``lock_wait``, ``sign``), ``decode`` without
the signature the target counts inside it (the join rule of ``results/breakdown.py``); a step
keeps their sums, so steps and repeats pool exactly.

A record belongs to a step exactly when it counts in the summary (``digest.step_shape``,
``steps.stage_of``, the measured window); repeats of a variant pool by offered rate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np
import yaml

from ramplab.experiment.sources import Group
from ramplab.measure.record import RequestRecord
from ramplab.results.digest import iter_records, step_shape
from ramplab.results.steps import stage_of
from ramplab.results.summary import RunSummary
from ramplab.runs.rundir import RunDir

__all__ = ["PHASES", "ModeCurve", "StepPoint", "read_curve", "server_phases", "stream_rate"]

PHASES = ("auth", "ratelimit", "queue", "prefill", "decode", "sign_queue", "lock_wait", "sign")
_SIGNATURE = ("sign_queue", "lock_wait", "sign")


def stream_rate(record: RequestRecord) -> float | None:
    """Tokens after the first content event ÷ first → last content event, in tokens/s."""
    if not record.ok or record.ttft_ms is None or record.ttlt_ms is None:
        return None
    first = record.tokens_per_event[0] if record.tokens_per_event else 1
    tokens = (record.output_tokens or 0) - first
    streaming_ms = record.ttlt_ms - record.ttft_ms
    if tokens <= 0 or streaming_ms <= 0:
        return None
    return tokens * 1000.0 / streaming_ms


def server_phases(record: RequestRecord) -> dict[str, float] | None:
    """The target's phases of one stream, ``decode`` without the signature; ``None`` when the
    server disclosed none."""
    timing = record.server_timing_ms
    if not any(k in timing for k in PHASES):
        return None
    phases = {k: float(timing.get(k, 0.0)) for k in PHASES}
    phases["decode"] = max(0.0, phases["decode"] - sum(phases[k] for k in _SIGNATURE))
    return phases


@dataclass
class StepPoint:
    """One offered rate of a variant, pooled over its repeats."""

    offered_qps: float
    achieved_qps: list[float] = field(default_factory=list)  # one per run
    rates: list[float] = field(default_factory=list)  # tokens/s per stream
    failed: int = 0
    timed: int = 0  # streams that carried server timings
    phase_sums_ms: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    sign_ms: list[float] = field(default_factory=list)  # each stream's sign phase

    @property
    def streams(self) -> int:
        return len(self.rates)

    def rate(self, q: float = 50) -> float | None:
        return float(np.percentile(self.rates, q)) if self.rates else None

    def phase_means_ms(self) -> dict[str, float] | None:
        if not self.timed:
            return None
        return {k: v / self.timed for k, v in self.phase_sums_ms.items()}

    def shares(self) -> dict[str, float] | None:
        """Each phase's share of the step's server-side time (ratio of sums)."""
        total = sum(self.phase_sums_ms.values())
        if not self.timed or total <= 0:
            return None
        return {k: v / total for k, v in self.phase_sums_ms.items()}

    def add(self, record: RequestRecord) -> None:
        if not record.ok:
            self.failed += 1
            return
        rate = stream_rate(record)
        if rate is None:
            return
        self.rates.append(rate)
        phases = server_phases(record)
        if phases is not None:
            self.timed += 1
            for k, v in phases.items():
                self.phase_sums_ms[k] += v
            self.sign_ms.append(phases["sign"])

    def to_json(self, min_streams: int) -> dict[str, Any]:
        enough = self.streams >= min_streams
        return {
            "offered_qps": self.offered_qps,
            "achieved_qps": float(np.mean(self.achieved_qps)) if self.achieved_qps else None,
            "streams": self.streams,
            "failed": self.failed,
            "tokens_per_s_p50": self.rate(50) if enough else None,
            "tokens_per_s_p10": self.rate(10) if enough else None,
            "server_ms": self.phase_means_ms(),
            "server_shares": self.shares(),
            "sign_ms_p50": median(self.sign_ms) if self.sign_ms else None,
        }


@dataclass
class ModeCurve:
    """A variant's curve: its signing mode and work factor (from its runs' campaigns)."""

    name: str
    mode: str
    work_factor: int
    runs: int
    steps: list[StepPoint]

    def pooled(self, count: int | None = None, below: float | None = None) -> StepPoint:
        """The first ``count`` steps with streams, or every step with streams offered at most
        ``below`` QPS, as one (a low-load reference)."""
        out = StepPoint(offered_qps=float("nan"))
        chosen = [s for s in self.steps if s.streams]
        chosen = chosen[:count] if below is None else [s for s in chosen if s.offered_qps <= below]
        for step in chosen:
            out.rates += step.rates
            out.timed += step.timed
            out.sign_ms += step.sign_ms
            for k, v in step.phase_sums_ms.items():
                out.phase_sums_ms[k] += v
        return out


def _signing(run_dir: Path) -> tuple[str, int]:
    """The run's ``target.settings.signing`` mode and work factor; the target's defaults
    (``locked``, 1: ``configs/app.toml``) when the campaign leaves them out."""
    path = RunDir(run_dir).campaign
    data: Any = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None
    signing: Any = data
    for key in ("target", "settings", "signing"):
        signing = signing.get(key) if isinstance(signing, dict) else None
    signing = signing if isinstance(signing, dict) else {}
    return str(signing.get("mode", "locked")), int(signing.get("work_factor", 1))


def read_curve(group: Group) -> ModeCurve:
    """One variant's per-step figures, its repeats pooled by offered rate."""
    points: dict[float, StepPoint] = {}
    mode, work_factor = _signing(group.runs[0].path)
    for run in group.runs:
        summary = RunSummary.model_validate(run.summary)
        shape = step_shape(summary)
        if shape is None:
            continue
        keys = []
        for step in summary.steps:
            x = float(step.target_qps or 0.0)
            point = points.setdefault(x, StepPoint(x))
            point.achieved_qps.append(step.achieved_qps)
            keys.append(point)
        start = summary.run_start or 0.0
        for record in iter_records(RunDir(run.path).records):
            stage = stage_of(record, shape, start)
            if stage is not None and stage.in_measured(record.intended_start - start):
                keys[stage.index].add(record)
    steps = [points[x] for x in sorted(points)]
    return ModeCurve(group.name, mode, work_factor, len(group.runs), steps)
