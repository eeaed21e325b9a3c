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

from pydantic import BaseModel, ConfigDict, Field

from ramplab.errors import UsageError
from ramplab.load.shapes import parse_duration
from ramplab.search.confidence import requests_to_pass

__all__ = [
    "Answer",
    "AnswerStatus",
    "Outcome",
    "SearchSpec",
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


class SearchSpec(BaseModel):
    """The campaign's ``search:`` section (every field optional)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    goodput_min: float = Field(default=95.0, gt=0, le=100)
    start_qps: float = Field(default=2.0, gt=0)
    max_qps: float = Field(default=256.0, gt=0)
    min_qps: float = Field(default=0.25, gt=0)
    growth: float = Field(default=2.0, gt=1, le=16)
    resolution_pct: float = Field(default=5.0, gt=0, le=100)
    max_probes: int = Field(default=12, ge=1, le=100)
    warmup: float | str = 2.0
    window: float | str = 2.0
    windows: int = Field(default=3, ge=2, le=100)
    max_hold: float | str = 60.0
    confidence: float = Field(default=0.95, ge=0.5, le=0.999)
    ci: Literal["wilson", "t"] = "wilson"
    criterion: Literal["lower_bound", "point"] = "lower_bound"
    early_stop: bool = True
    # over-saturation
    achieved_tolerance_pct: float = Field(default=5.0, ge=0, le=100)
    drop_tolerance_pct: float = Field(default=1.0, ge=0, le=100)
    queue_growth_ms: float = Field(default=50.0, gt=0)
    lateness_growth_ms: float = Field(default=20.0, gt=0)
    # the generator
    max_generator_cpu_pct: float = Field(default=90.0, gt=0, le=100)
    max_lateness_ms: float = Field(default=50.0, gt=0)
    # a generator-limited probe is run again this many times before the search gives up
    # (a shared machine's hiccup is not a verdict)
    generator_retries: int = Field(default=1, ge=0, le=5)
    # between probes
    settle: float | str = 30.0
    cooldown: float | str = 0.0

    @property
    def goal(self) -> float:
        """``goodput_min`` as a ratio."""
        return self.goodput_min / 100.0

    def seconds(self, name: str, prefix: str = "search") -> float:
        """A duration field in seconds (``"2s"``, ``500ms``, ``2``)."""
        return parse_duration(getattr(self, name), f"{prefix}.{name}")

    def check(self, prefix: str = "search") -> None:
        """What pydantic cannot see field by field; ``UsageError`` names the field."""
        for name in ("warmup", "window", "max_hold", "settle", "cooldown"):
            self.seconds(name, prefix)
        if self.seconds("window") <= 0:
            raise UsageError(f"{prefix}.window", "must be longer than 0 s")
        if self.start_qps > self.max_qps:
            raise UsageError(
                f"{prefix}.start_qps", f"{self.start_qps:g} is above max_qps {self.max_qps:g}"
            )
        if self.min_qps > self.start_qps:
            raise UsageError(
                f"{prefix}.min_qps", f"{self.min_qps:g} is above start_qps {self.start_qps:g}"
            )
        if self.criterion == "lower_bound" and self.goodput_min >= 100:
            raise UsageError(
                f"{prefix}.goodput_min",
                "100 can never be cleared by a lower bound: lower it or set criterion: point",
            )
        if self.seconds("max_hold") < self.windows * self.seconds("window"):
            raise UsageError(
                f"{prefix}.max_hold",
                f"{self.max_hold!r} is shorter than windows × window "
                f"({self.windows} × {self.seconds('window'):g} s)",
            )

    def min_requests(self) -> int:
        """Requests a probe needs so that a perfect one can pass (1 with ``criterion: point``)."""
        if self.criterion == "point":
            return 1
        return requests_to_pass(self.goal, self.confidence)

    def window_s(self, rate: float) -> float:
        """One window's length at ``rate``: ``window``, stretched so that the whole hold holds
        ``min_requests`` arrivals (a perfect probe can pass), at most ``max_hold`` in all."""
        base = self.seconds("window")
        needed = self.min_requests() / rate / self.windows if rate > 0 else base
        return min(max(base, needed), self.seconds("max_hold") / self.windows)

    def shape_text(self, rate: float) -> str:
        """The probe's shape: ``windows`` stages at ``rate``, the first preceded by the warm-up,
        so each window is one step of the run's summary."""
        window = self.window_s(rate)
        warmup = self.seconds("warmup")
        stages = [f"{rate!r}@{window + warmup!r}s/{warmup!r}s"]
        stages += [f"{rate!r}@{window!r}s/0.0s"] * (self.windows - 1)
        return "custom:" + ",".join(stages)


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
    criterion = "lower bound" if spec.criterion == "lower_bound" else "point estimate"
    return (f"search for the max QPS with ≥ {spec.goodput_min:g} % meeting the SLO "
            f"({spec.ci} {spec.confidence * 100:g} % {criterion}): from {spec.start_qps:g} QPS "
            f"×{spec.growth:g} up to {spec.max_qps:g}, then bisection to "
            f"{spec.resolution_pct:g} %; "
            f"probes of {spec.seconds('warmup'):g} s warm-up + {spec.windows} windows of "
            f"≥ {spec.seconds('window'):g} s, at most {spec.max_probes}")  # fmt: skip
