"""Can a step's tails be trusted? The stamps' own error bounds, counted step by step.

Every record says how far its stamps may be off (``docs/metrics.md``, "How exact the stamps
are"): ``stamp_error_ms`` bounds the error of ``ttft_send_ms``/``ttlt_send_ms`` — the bracket
around the system call that sent the request, plus how far above their arrival the first and
last token's stamps may be when they were read in one piece with a later event —,
``coalesced_events`` names the token events whose stamp is only such an upper bound (their gaps
are kept out of the ITL figures and counted in ``itl_coalesced``), and ``stamp_error_ms`` is
``null`` when the stamps were taken in user space (TLS, no kernel stamps): then nothing bounds
them but the event loop's own lag.

The rule (``docs/summary.md`` quotes it) — a step is ``untrusted`` when its p99s cannot be
held to ``STAMP_BOUND_MS`` (1 ms): a p99 moves when more than 1 % of the values move, so any of

- **TTFT/TTLT**: more than ``TAIL_SHARE`` (1 %) of the step's successful requests have a
  ``stamp_error_ms`` above ``STAMP_BOUND_MS``;
- **ITL**: more than ``TAIL_SHARE`` of its inter-token gaps were read coalesced;
- **user-space stamps**: some of its requests were stamped in user space and a worker's event
  loop stalled longer than ``STAMP_BOUND_MS`` during the step (the loop-lag probe of
  ``selfcheck.py``): any read could have been that late.

``None`` when the step has no successful request (nothing to trust or distrust). The generator's
own bottleneck rule (``generator_bound``, ``selfcheck.py``) is a separate question: whether the
*load* was offered as asked. A starved generator whose kernel stamps keep every figure exact is
not untrusted; one whose stamps cannot say when bytes arrived is, whatever its CPU.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ramplab.measure.record import RequestRecord
from ramplab.results.selfcheck import flagged_steps, generator_warning, untrust_passes
from ramplab.results.summary import GateVerdict, RunSummary, StepStats, WorkerHealth

__all__ = [
    "DROP_RATIO",
    "LATENESS_MS",
    "STAMP_BOUND_MS",
    "TAIL_SAMPLE",
    "TAIL_SHARE",
    "RunTrust",
    "StepTrust",
    "judge_stamps",
    "late",
    "run_trust",
    "run_warnings",
    "stamp_figures",
    "step_trust",
    "timing_gate",
    "untrusted_gates",
    "untrusted_warning",
]

STAMP_BOUND_MS = 1.0
TAIL_SHARE = 0.01
# Gates on figures the stamps make: a gate on error_ratio or a rate stays what it was.
TIMED = ("ttft", "itl", "ttlt", "tpot", "ttfb", "goodput", "slo")


def stamp_figures(records: Sequence[RequestRecord]) -> dict[str, Any]:
    """The stamp fields of ``Figures`` over the successful records of one window."""
    ok = [r for r in records if r.ok]
    coalesced = sum(len(r.itl_ms) - len(r.measured_itl()) for r in ok if r.coalesced_events)
    bounds = [r.stamp_error_ms for r in ok if r.stamp_error_ms is not None]
    return {
        "itl_coalesced": coalesced,
        "stamps_uncertain": sum(1 for bound in bounds if bound > STAMP_BOUND_MS),
        "stamps_unbounded": sum(1 for r in ok if r.stamp_error_ms is None),
        "stamp_error_max_ms": max(bounds) if bounds else None,
    }


def judge_stamps(
    figures: Mapping[str, Any], health: Mapping[str, WorkerHealth] | None
) -> tuple[bool | None, str | None]:
    """``(untrusted, reason)`` of one step by the rule above (``figures``: ``measure``'s)."""
    ok = int(figures["ok"])
    if ok == 0:
        return None, None
    reasons = []
    uncertain = int(figures["stamps_uncertain"])
    if uncertain > TAIL_SHARE * ok:
        reasons.append(
            f"{uncertain} of {ok} requests' send or token stamps may be off by more than "
            f"{STAMP_BOUND_MS:g} ms (up to {figures['stamp_error_max_ms']:.1f} ms): TTFT/TTLT "
            f"p99 not within ±{STAMP_BOUND_MS:g} ms"
        )
    gaps = int(figures["itl_ms"].count or 0) + int(figures["itl_coalesced"])
    coalesced = int(figures["itl_coalesced"])
    if gaps and coalesced > TAIL_SHARE * gaps:
        reasons.append(
            f"{coalesced} of {gaps} inter-token gaps ({coalesced / gaps:.1%}) were read "
            "coalesced, their arrival unknown (kept out of ITL)"
        )
    unbounded = int(figures["stamps_unbounded"])
    stalls = [h.loop_lag_max_ms for h in (health or {}).values() if h.loop_lag_max_ms is not None]
    if unbounded and stalls and max(stalls) > STAMP_BOUND_MS:
        reasons.append(
            f"{unbounded} of {ok} requests stamped in user space (no kernel stamps: TLS) while "
            f"the event loop stalled up to {max(stalls):.1f} ms"
        )
    return (True, "; ".join(reasons)) if reasons else (False, None)


def timing_gate(verdict: GateVerdict) -> bool:
    """Whether a gate reads a figure the stamps make (TTFT, ITL, TPOT, TTLT, goodput …)."""
    return any(name in verdict.gate for name in TIMED)


def untrusted_gates(
    verdicts: Sequence[GateVerdict], summary: Mapping[str, Any]
) -> tuple[GateVerdict, ...]:
    """Gates on timing figures of a run with an untrusted step (``summary`` in its
    ``summary.json`` form): a pass becomes ``untrusted``; fail and invalid stay."""
    return untrust_passes(
        verdicts, summary, "untrusted", "untrusted_reason", "stamps untrusted", timing_gate
    )


def untrusted_warning(summary: RunSummary) -> str | None:
    """The report's (and the console's) warning for a run with untrusted steps, else None."""
    if not summary.untrusted:
        return None
    steps = flagged_steps(summary, "untrusted", "untrusted_reason")
    return (
        f"WARNING: timing tails cannot be trusted to ±{STAMP_BOUND_MS:g} ms ({steps}). The "
        "generator could not stamp every request exactly; gates on timing figures are "
        "untrusted. Add workers, give them CPUs of their own, or lower the load."
    )


def run_warnings(summary: RunSummary) -> list[str]:
    """Every warning a run's figures carry, for the console and the reports: the generator was
    the bottleneck (``selfcheck.py``), its stamps cannot vouch for the tails (above)."""
    found = (generator_warning(summary), untrusted_warning(summary))
    return [warning for warning in found if warning is not None]


# The one trust status every view states (the verdict, the recommendations, the terminal): the
# generator self-check, the stamps, the drops and the lateness judged together, each on enough
# requests to mean something.
Level = Literal["trusted", "caution", "untrusted"]
LATENESS_MS = 20.0  # lateness at the judged percentile above which a step was sent late
DROP_RATIO = 0.01  # dropped ÷ scheduled above which the target saw less than the offered load
# A p99 over fewer requests is the few largest values: such a step is judged at p90 instead,
# and one over fewer than MIN_LATENESS_SAMPLE sent requests not on lateness at all.
TAIL_SAMPLE = 100
MIN_LATENESS_SAMPLE = 10


@dataclass(frozen=True, slots=True)
class StepTrust:
    """One step's standing: ``untrusted`` (its figures measured the generator — the run exits
    4 —, or its stamps cannot vouch for the tails — gates on timing figures read
    ``untrusted``), ``caution`` (the load it offered was late or
    thinned by drops: the figures are exact, but for a lighter or later load than asked) or
    ``trusted``, with the reasons."""

    index: int
    level: Level
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RunTrust:
    """The run's standing: its worst step's level, and every step that is not trusted."""

    level: Level
    steps: tuple[StepTrust, ...]

    @property
    def flagged(self) -> tuple[StepTrust, ...]:
        return tuple(s for s in self.steps if s.level != "trusted")

    def of(self, index: int) -> StepTrust | None:
        return next((s for s in self.steps if s.index == index), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "steps": [
                {"index": s.index, "level": s.level, "reasons": list(s.reasons)}
                for s in self.flagged
            ],
        }


def late(step: StepStats, limit_ms: float = LATENESS_MS) -> tuple[str, float] | None:
    """``(percentile, value)`` when the step was sent late: lateness p99 at or above
    ``limit_ms`` over at least ``TAIL_SAMPLE`` sent requests, or p90 over fewer (at least
    ``MIN_LATENESS_SAMPLE``); None otherwise."""
    count = step.lateness_ms.count
    if count >= TAIL_SAMPLE:
        judged = ("p99", step.lateness_ms.p99)
    elif count >= MIN_LATENESS_SAMPLE:
        judged = ("p90", step.lateness_ms.p90)
    else:
        return None
    name, value = judged
    if value is None or value < limit_ms:
        return None
    return name, value


def step_trust(
    step: StepStats, lateness_ms: float = LATENESS_MS, drop_ratio: float = DROP_RATIO
) -> StepTrust:
    untrusted = []
    if step.generator_bound:
        untrusted.append(f"generator-bound: {step.generator_reason}")
    if step.untrusted:
        untrusted.append(f"stamps untrusted: {step.untrusted_reason}")
    if untrusted:
        return StepTrust(step.index, "untrusted", tuple(untrusted))
    caution = []
    judged = late(step, lateness_ms)
    if judged is not None:
        name, value = judged
        caution.append(f"sent late: lateness {name} {value:.0f} ms (limit {lateness_ms:g} ms)")
    if (step.drop_ratio or 0.0) >= drop_ratio:
        caution.append(
            f"{step.dropped} of {step.scheduled} arrivals dropped ({step.drop_ratio:.1%}; limit "
            f"{drop_ratio:.0%})"
        )
    return StepTrust(step.index, "caution" if caution else "trusted", tuple(caution))


def run_trust(
    summary: RunSummary, lateness_ms: float = LATENESS_MS, drop_ratio: float = DROP_RATIO
) -> RunTrust:
    """Every step's standing; the run's level is its worst step's."""
    steps = tuple(step_trust(s, lateness_ms, drop_ratio) for s in summary.steps)
    levels = {s.level for s in steps}
    level: Level = (
        "untrusted" if "untrusted" in levels else "caution" if "caution" in levels else "trusted"
    )
    return RunTrust(level, steps)
