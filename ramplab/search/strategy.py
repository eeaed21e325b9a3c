"""The max sustainable rate under SLO: the ``search:`` settings and the choice of the next probe.

The question: "the highest rate at which at least ``goodput_min`` % of requests meet every SLO
of the campaign". The answer is a bracket ``[highest pass, lowest fail]`` found in two phases:

1. **probe** — geometric steps from ``start_qps`` (× ``growth``) until a probe fails or
   ``max_qps`` passes; when the very first probe fails, the same steps go down (÷ ``growth``)
   until one passes or the rate falls below ``min_qps``;
2. **bisect** — the midpoint of the bracket, until its width is at most ``resolution_pct`` % of
   the highest pass (or ``max_probes`` probes ran).

A probe that fails above one that passed narrows the bracket; a pass *above* a failure (noise
at the edge) is not allowed to widen it back: the bracket always uses the lowest failure and the
highest pass below it — the conservative reading. A generator-limited probe ends the search:
past that point a pass cannot be told from a saturated client (``verdict.py``).

Everything here is a pure function of the settings and the probes so far, tested on hand-made
outcomes; running probes is ``search_run.py``'s job.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ramplab.campaign.search import SearchSpec

__all__ = [
    "Answer",
    "AnswerStatus",
    "Outcome",
    "Verdict",
    "answer",
    "bracket",
    "describe",
    "next_rate",
]

Verdict = Literal["pass", "fail", "generator-limited"]
AnswerStatus = Literal[
    "found",  # a bracket within the resolution
    "above-max",  # max_qps passed: the capacity is at least that
    "below-min",  # even the lowest rate tried failed
    "probe-limit",  # max_probes ran before the resolution was reached
    "generator-limited",  # the load generator could not be trusted: no rate
    "interrupted",
]
# Probe rates are rounded to this many significant digits, so they read well in a table.
DIGITS = 3


@dataclass(frozen=True, slots=True)
class Outcome:
    """A finished probe as the search sees it."""

    rate: float
    verdict: Verdict
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Answer:
    """The search's result: ``rate`` is the highest pass (``None``: no rate can be stated)."""

    status: AnswerStatus
    rate: float | None
    bracket: tuple[float | None, float | None]
    reason: str


def _round(rate: float) -> float:
    if rate <= 0:
        return rate
    digits = DIGITS - 1 - math.floor(math.log10(rate))
    return round(rate, digits)


def bracket(outcomes: Sequence[Outcome]) -> tuple[float | None, float | None]:
    """``(highest pass below the lowest fail, lowest fail)``; ``None`` where there is none."""
    fails = [o.rate for o in outcomes if o.verdict == "fail"]
    low_fail = min(fails) if fails else None
    passes = [o.rate for o in outcomes if o.verdict == "pass"]
    if low_fail is not None:
        passes = [r for r in passes if r < low_fail]
    return (max(passes) if passes else None, low_fail)


def _resolved(spec: SearchSpec, high_pass: float, low_fail: float) -> bool:
    return (low_fail - high_pass) <= spec.resolution_pct / 100.0 * high_pass * (1 + 1e-9)


def next_rate(spec: SearchSpec, outcomes: Sequence[Outcome]) -> float | None:
    """The next probe's rate, or ``None`` when the search is over (see ``answer``)."""
    if not outcomes:
        return _round(spec.start_qps)
    if any(o.verdict == "generator-limited" for o in outcomes) or len(outcomes) >= spec.max_probes:
        return None
    tried = {o.rate for o in outcomes}
    high_pass, low_fail = bracket(outcomes)
    if low_fail is None:  # probe up
        assert high_pass is not None
        if high_pass >= spec.max_qps:
            return None
        rate = _round(min(high_pass * spec.growth, spec.max_qps))
        return rate if rate not in tried else None
    if high_pass is None:  # probe down
        rate = _round(low_fail / spec.growth)
        return rate if rate >= spec.min_qps and rate not in tried else None
    if _resolved(spec, high_pass, low_fail):
        return None
    rate = _round((high_pass + low_fail) / 2.0)
    if rate in tried or not high_pass < rate < low_fail:  # rounding cannot split it further
        return None
    return rate


def answer(spec: SearchSpec, outcomes: Sequence[Outcome], interrupted: bool = False) -> Answer:
    """What the probes so far say."""
    high_pass, low_fail = bracket(outcomes)
    pair = (high_pass, low_fail)
    limited = next((o for o in outcomes if o.verdict == "generator-limited"), None)
    if limited is not None:
        return Answer(
            "generator-limited", None, pair,
            f"the load generator was the limit at {limited.rate:g} QPS ({limited.reason}): "
            "a pass there could be a saturated client; add workers or lower the load",
        )  # fmt: skip
    if interrupted:
        return Answer("interrupted", high_pass, pair, "the bracket so far")
    if low_fail is None:
        if high_pass is not None and high_pass >= spec.max_qps:
            return Answer("above-max", high_pass, pair,
                          f"every probe passed up to max_qps {spec.max_qps:g} QPS")  # fmt: skip
        return Answer("probe-limit", high_pass, pair, "no probe failed before the search ended")
    if high_pass is None:
        return Answer("below-min", None, pair,
                      f"every probe failed, down to {low_fail:g} QPS")  # fmt: skip
    if _resolved(spec, high_pass, low_fail):
        width = f"bracket {high_pass:g}–{low_fail:g} QPS"
        return Answer("found", high_pass, pair, f"within {spec.resolution_pct:g} % ({width})")
    why = f"max_probes {spec.max_probes} ran before the resolution was reached"
    return Answer("probe-limit", high_pass, pair, why)


def describe(spec: SearchSpec) -> str:
    """The search plan in one line (``ramplab validate``)."""
    if spec.criterion == "test":
        chosen = spec.plan()
        rule = (f"pass with ≥ {chosen.needed} good of {chosen.requests} arrivals: at "
                f"{spec.goodput_min:g} % with probability ≥ {spec.power:g}, at "
                f"{spec.floor * 100:g} % ≤ {1 - spec.confidence:.3g}")  # fmt: skip
    elif spec.criterion == "lower_bound":
        rule = f"{spec.ci} {spec.confidence * 100:g} % lower bound"
    else:
        rule = "point estimate"
    return (f"search for the max QPS with ≥ {spec.goodput_min:g} % meeting the SLO "
            f"({rule}): from {spec.start_qps:g} QPS "
            f"×{spec.growth:g} up to {spec.max_qps:g}, then bisection to "
            f"{spec.resolution_pct:g} %; "
            f"probes of {spec.seconds('warmup'):g} s warm-up + {spec.windows} windows of "
            f"≥ {spec.seconds('window'):g} s, at most {spec.max_probes}")  # fmt: skip
