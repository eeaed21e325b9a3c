"""The verdict: what a run answers, in six lines, before any table.

Read off the summary, the digest and the fired recommendations, never computed anew:

- **SLO**: the campaign's per-request SLO, or — without one — success alone, said as such; a
  step *meets* it when at least ``GOAL`` (95 %) of its requests did (its attainment,
  ``goodput_ratio``);
- **answer**: the highest step of the run of meeting steps from the lowest load up, with its
  attainment, and the first step above it that does not (missed, or untrusted). A step that
  meets again above a miss does not extend the answer: capacity is where the curve first
  breaks;
- **knee**: where TTFT's tail (from the send) first doubled while the generator kept up — the
  ``server_queueing`` rule's two steps —, or that the ramp showed none;
- **cause**: at the first miss (else at the knee) what broke it: errors when they alone cost
  the goal (their commonest kind), otherwise the segment of the slowest 1 %'s time that grew
  most since the lowest step (the phase breakdown, the server's view when it sent timings);
- **trust**: the run's one standing (``results/trust.py``): the self-check, the stamps, the
  drops and the lateness together;
- **next**: one action — make the generator sufficient when it was not, widen the ramp when
  nothing broke, else the first ``act`` recommendation's advice (``slo_misses`` aside: it
  restates the answer), else a search between the
  last meeting and the first missing rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ramplab.report.recommend import Recommendation
from ramplab.results.breakdown import CLIENT_LABELS, SERVER_LABELS, group_breakdown
from ramplab.results.digest import RunDigest
from ramplab.results.offered import offered_load
from ramplab.results.summary import RunSummary, StepStats
from ramplab.results.trust import RunTrust, run_trust

__all__ = ["GOAL", "StepAnswer", "Verdict", "judge"]

GOAL = 0.95  # the share of a step's requests that must meet the SLO for the step to meet it


@dataclass(frozen=True, slots=True)
class StepAnswer:
    """One step's answer: its load, attainment, whether it meets the SLO and can be trusted."""

    index: int
    load: str  # "20 QPS", "16 users"
    attainment: float | None  # goodput_ratio; None without a request
    meets: bool
    trusted: bool  # not ``untrusted`` (caution still counts: its figures are exact)
    errors_dominate: bool = False  # failures alone cost the goal

    def describe(self) -> str:
        shown = "no requests" if self.attainment is None else f"{self.attainment:.1%}"
        return f"{self.load} ({shown})"


@dataclass(frozen=True)
class Verdict:
    slo: str  # the SLO as judged: "ttft_ms ≤ 500 ms" or "success alone (no latency SLO set)"
    slo_set: bool
    goal: float
    steps: tuple[StepAnswer, ...]  # ascending offered load
    highest: StepAnswer | None  # the highest step of the meeting run from the lowest load
    first_miss: StepAnswer | None  # the step above it that does not meet (or is untrusted)
    knee: str
    cause: str | None
    trust: RunTrust
    trust_text: str
    action: str

    @property
    def answer(self) -> str:
        criterion = (
            f"{self.slo} for ≥ {self.goal:.0%} of requests"
            if self.slo_set
            else f"≥ {self.goal:.0%} of requests succeeding (no latency SLO set)"
        )
        if not self.steps or all(s.attainment is None for s in self.steps):
            return f"no step measured a request, so nothing could be judged against {criterion}"
        if self.highest is None:
            first = self.steps[0]
            if not first.trusted:
                return (
                    f"cannot judge {criterion}: the lowest step, {first.describe()}, is untrusted"
                )
            return f"misses {criterion} from the lowest step, {first.describe()}"
        text = f"meets {criterion} up to {self.highest.describe()}"
        if self.first_miss is None:
            return text + ", the highest step: the limit lies beyond the ramp"
        if not self.first_miss.trusted:
            return text + f"; {self.first_miss.load} and above are untrusted"
        return text + f"; misses at {self.first_miss.describe()}"

    def lines(self) -> list[tuple[str, str]]:
        """(label, sentence) in reading order: every view renders these."""
        out = [
            ("SLO", f"{self.slo}; a step meets it when ≥ {self.goal:.0%} of its requests do"),
            ("answer", self.answer),
            ("knee", self.knee),
        ]
        if self.cause is not None:
            out.append(("cause", self.cause))
        out += [("trust", self.trust_text), ("next", self.action)]
        return out

    @property
    def headline(self) -> str:
        return f"{self.answer} · trust: {self.trust.level}"

    def to_json(self) -> dict[str, Any]:
        return {
            "slo": self.slo,
            "slo_set": self.slo_set,
            "goal": self.goal,
            "highest_step": None if self.highest is None else self.highest.index,
            "first_miss_step": None if self.first_miss is None else self.first_miss.index,
            "steps": [
                {"index": s.index, "load": s.load, "attainment": s.attainment, "meets": s.meets}
                for s in self.steps
            ],
            "trust": self.trust.to_json(),
            "lines": dict(self.lines()),
        }


def _load(step: StepStats) -> str:
    value, unit = offered_load(step)
    return f"{value:g} {unit}"


def _answers(summary: RunSummary, trust: RunTrust, goal: float) -> tuple[StepAnswer, ...]:
    ranked = sorted(summary.steps, key=lambda s: offered_load(s)[0])
    out = []
    for step in ranked:
        standing = trust.of(step.index)
        trusted = standing is None or standing.level != "untrusted"
        attainment = step.goodput_ratio if step.requests else None
        meets = attainment is not None and attainment >= goal and trusted
        errors = bool(step.requests) and (step.error_ratio or 0.0) > 1.0 - goal
        out.append(StepAnswer(step.index, _load(step), attainment, meets, trusted, errors))
    return tuple(out)


def _bracket(answers: Sequence[StepAnswer]) -> tuple[StepAnswer | None, StepAnswer | None]:
    highest = None
    for answer in answers:
        if not answer.meets:
            return highest, answer
        highest = answer
    return highest, None


def _knee(summary: RunSummary, recommendations: Sequence[Recommendation]) -> tuple[str, int | None]:
    fired = next((r for r in recommendations if r.rule == "server_queueing"), None)
    if fired is None or len(fired.steps) < 2:
        return "no latency knee within the ramp (TTFT p99 from the send never doubled while "\
            "the generator kept up)", None  # fmt: skip
    low, high = (next(s for s in summary.steps if s.index == i) for i in fired.steps[:2])
    text = (
        f"TTFT p99 from the send doubled between {_load(low)} ({low.ttft_send_ms.p99:.0f} ms) "
        f"and {_load(high)} ({high.ttft_send_ms.p99:.0f} ms)"
    )
    return text, high.index


def _step(summary: RunSummary, index: int) -> StepStats:
    return next(s for s in summary.steps if s.index == index)


def _cause(summary: RunSummary, digest: RunDigest, index: int, goal: float) -> str | None:
    step = _step(summary, index)
    where = _load(step)
    if step.requests and (step.error_ratio or 0.0) > 1.0 - goal:
        kinds = step.error_kinds or step.errors
        commonest = max(kinds.items(), key=lambda kv: kv[1])[0] if kinds else "unknown"
        return f"errors at {where}: {step.error_ratio:.1%} of requests failed (most: {commonest})"
    digests = {d.index: d for d in digest.steps}
    ranked = sorted(
        (s for s in summary.steps if s.index in digests and len(digests[s.index].phases)),
        key=lambda s: offered_load(s)[0],
    )
    if step.index not in digests or not ranked or ranked[0].index == step.index:
        return None
    base = group_breakdown(digests[ranked[0].index].phases, "p99")
    top = group_breakdown(digests[step.index].phases, "p99")
    if base is None or top is None:
        return None
    if base.server is not None and top.server is not None:
        before, after, labels = base.server, top.server, SERVER_LABELS
    else:
        before, after, labels = base.client, top.client, CLIENT_LABELS
    growth = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    segment = max(growth, key=lambda k: growth[k])
    grew = growth[segment]
    total = top.ttlt_ms - base.ttlt_ms
    if grew <= 0 or not np.isfinite(grew):
        return None
    share = f", {grew / total:.0%} of the growth" if total > 0 else ""
    return (
        f"{labels[segment]} grew most in the slowest 1 %'s time: {before.get(segment, 0.0):.0f}"
        f" → {after[segment]:.0f} ms from {_load(ranked[0])} to {where}{share}"
    )


def _trust_text(trust: RunTrust, summary: RunSummary) -> str:
    if trust.level == "trusted":
        return (
            "trusted: at every step the generator kept up, sent on time and dropped under 1 % "
            "of arrivals, and its stamps hold the tails to ±1 ms"
        )
    loads = {s.index: _load(s) for s in summary.steps}
    worst = [s for s in trust.flagged if s.level == trust.level]
    detail = "; ".join(f"{loads[s.index]}: {s.reasons[0]}" for s in worst[:3])
    more = f" (and {len(worst) - 3} more steps)" if len(worst) > 3 else ""
    if trust.level == "untrusted":
        exits = ", exit 4" if summary.generator_bound else ""
        return f"untrusted at {len(worst)} step(s){exits} — {detail}{more}"
    return f"caution at {len(worst)} step(s): exact figures for a later or lighter load — "\
        f"{detail}{more}"  # fmt: skip


def advice(recommendation: Recommendation) -> str:
    """What a recommendation says to do: its sentence after the measured clause."""
    _, _, rest = recommendation.message.partition(": ")
    return rest or recommendation.message


def _action(
    verdict_steps: tuple[StepAnswer, ...],
    highest: StepAnswer | None,
    first_miss: StepAnswer | None,
    trust: RunTrust,
    recommendations: Sequence[Recommendation],
    slo_set: bool,
) -> str:
    if trust.level == "untrusted":
        return "give the generator more capacity (more workers, CPUs of their own) or lower the "\
            "load, then rerun: untrusted steps measured the generator, not the target"  # fmt: skip
    if not verdict_steps:
        return "check the target answers (ramplab run --target … at one low rate)"
    if first_miss is None and highest is not None:
        return f"raise the ramp above {highest.load} to find where it breaks" + (
            "" if slo_set else "; set an SLO (slo: {ttft_ms: …}) to judge latency, not success"
        )
    if first_miss is not None and first_miss.errors_dominate:
        return (
            f"fix the errors first: at {first_miss.load} most requests failed (report.md lists "
            "their kinds with the server's own words); latency means little until they succeed"
        )
    # slo_misses restates the answer (latency, not errors, limits goodput): no action of its own.
    # A rule whose sentence says no more than its figure has no advice to give here.
    act = next(
        (
            r
            for r in recommendations
            if r.severity == "act" and r.rule != "slo_misses" and ": " in r.message
        ),
        None,
    )
    if act is not None:
        return f"{advice(act)} ({act.rule})"
    if highest is None:
        return "start the ramp lower: even the lowest step misses the SLO"
    assert first_miss is not None
    return (
        f"narrow it down: ramplab search between {highest.load} and {first_miss.load} (docs/cli.md)"
    )


def judge(
    summary: RunSummary,
    digest: RunDigest,
    recommendations: Sequence[Recommendation],
    goal: float = GOAL,
) -> Verdict:
    """The run's verdict (module docstring)."""
    slo_set = bool(summary.slo)
    slo = (
        ", ".join(f"{name} ≤ {limit:g} ms" for name, limit in (summary.slo or {}).items())
        if slo_set
        else "success alone (no latency SLO set)"
    )
    trust = run_trust(summary)
    answers = _answers(summary, trust, goal)
    highest, first_miss = _bracket(answers)
    knee, knee_index = _knee(summary, recommendations)
    at = first_miss.index if first_miss is not None and first_miss.trusted else knee_index
    cause = None if at is None else _cause(summary, digest, at, goal)
    action = _action(answers, highest, first_miss, trust, recommendations, slo_set)
    return Verdict(
        slo, slo_set, goal, answers, highest, first_miss, knee, cause, trust,
        _trust_text(trust, summary), action,
    )  # fmt: skip
