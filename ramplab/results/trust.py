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
from typing import Any

from ramplab.measure.record import RequestRecord
from ramplab.results.selfcheck import flagged_steps, generator_warning, untrust_passes
from ramplab.results.summary import GateVerdict, RunSummary, WorkerHealth

__all__ = [
    "STAMP_BOUND_MS",
    "TAIL_SHARE",
    "judge_stamps",
    "run_warnings",
    "stamp_figures",
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
