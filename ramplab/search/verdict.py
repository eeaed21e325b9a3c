"""One probe judged: its windows, its attainment with a confidence interval, and why it failed.

A probe's hold is ``windows`` equal stages at one rate, so every window is one step of the
probe run's ``summary.json``. The checks, in this order (the first that fires decides):

1. **generator CPU** — any worker above ``max_generator_cpu_pct`` % of a core during the hold:
   the client was the bottleneck, nothing else it measured can be trusted → generator-limited;
2. **over-saturation** (the target, seen from the client) → fail:
   fewer arrivals sent than scheduled by more than ``achieved_tolerance_pct`` % (one arrival
   per window is allowed for the window's edge); dropped arrivals (no free user: every one
   waits on the target) above ``drop_tolerance_pct`` %; the server's queue growing — TTFT p50
   rising window after window by more than ``queue_growth_ms`` in all; lateness p99 rising the
   same way by more than ``lateness_growth_ms`` (not on an early-stopped probe: the requests
   in flight when it stopped left no record, which would read as a shortfall);
3. **generator lateness** — pooled lateness p99 above ``max_lateness_ms`` with no saturation
   signal: the client sent late on its own (TTFT counts from the intended start, so its misses
   may be the client's) → generator-limited; checked before the live watch's early stop for
   the same reason;
4. **early stop** — the live watch stopped the probe (``watch.py``) → fail;
5. **attainment** — good ÷ arrivals over the hold, pooled. With ``criterion: test`` (the
   default) the probe passes when at least ``k(n)`` of its ``n`` arrivals were good: the exact
   one-sided binomial test that the attainment is above ``goodput_min − tolerance_pct`` at
   ``confidence`` (``results/acceptance.py``, which also sizes the hold so that a system at
   exactly ``goodput_min`` passes with probability ``power``). With ``criterion: lower_bound``
   the interval's lower bound, with ``criterion: point`` the point estimate, must reach
   ``goodput_min`` %.

**Every arrival is counted.** A window's arrivals are what the schedule put in it, not only the
records found there: ``scheduled = dispatched + dropped + lost`` and ``dispatched = completed +
failed + unfinished + unaccounted`` (``results/conservation.py``). An arrival that was dropped
(no free user), lost (never sent) or dispatched without a record got no answer: it is a miss, in
the denominator. Arrivals the counts cannot place (``missing``: scheduled, but neither a record
nor a drop) are misses too, and the probe's reason says how many.

The interval is Wilson's on the pooled ratio (``ci: wilson``) or Student's t across the window
ratios (``ci: t``); both are computed and reported.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ramplab.campaign.search import SearchSpec
from ramplab.results.acceptance import threshold
from ramplab.results.confidence import Interval, t_interval, wilson
from ramplab.results.summary import RunSummary, StepStats
from ramplab.search.strategy import Verdict

__all__ = ["Judgement", "Window", "judge", "windows_of"]


@dataclass(frozen=True, slots=True)
class Window:
    """One window of a probe's hold, every arrival in it accounted for."""

    requests: int  # records whose arrival falls in the window
    good: int
    dropped: int
    scheduled: int | None
    offered_qps: float | None
    achieved_qps: float
    ttft_p50_ms: float | None
    lateness_p99_ms: float | None
    dispatched: int | None = None
    completed: int = 0
    failed: int = 0
    unfinished: int = 0
    lost: int | None = None  # scheduled, never sent (their worker stopped or died)
    unaccounted: int | None = None  # dispatched without a record

    @property
    def missing(self) -> int:
        """Scheduled arrivals with neither a record nor a drop count: lost, unaccounted, or
        never heard of — each one a miss (negative: more records than the schedule's count)."""
        if self.scheduled is None:
            return 0
        return self.scheduled - self.requests - self.dropped

    @property
    def arrivals(self) -> int:
        """The attainment's denominator: every scheduled arrival, or the records plus the
        drops when the schedule is unknown (or counted fewer)."""
        return self.requests + self.dropped + max(0, self.missing)

    @property
    def attainment(self) -> float | None:
        return self.good / self.arrivals if self.arrivals else None

    @classmethod
    def of(cls, step: StepStats) -> Window:
        good = round((step.goodput_ratio or 0.0) * step.requests)
        return cls(
            requests=step.requests,
            good=good,
            dropped=step.dropped or 0,
            scheduled=step.scheduled,
            offered_qps=step.offered_qps,
            achieved_qps=step.achieved_qps,
            ttft_p50_ms=step.ttft_ms.p50,
            lateness_p99_ms=step.lateness_ms.p99,
            dispatched=step.dispatched,
            completed=step.completed,
            failed=step.failed,
            unfinished=step.unfinished,
            lost=step.lost,
            unaccounted=step.unaccounted,
        )


def windows_of(summary: RunSummary) -> list[Window]:
    """The measured windows of a probe run (an early-stopped one has fewer)."""
    return [Window.of(step) for step in summary.steps if step.measured_s > 0]


@dataclass(frozen=True, slots=True)
class Judgement:
    verdict: Verdict
    reason: str
    attainment: Interval  # the one that decides (``spec.ci``)
    wilson: Interval
    t: Interval


def _rising(values: Sequence[float | None], threshold: float) -> float | None:
    """The total rise when ``values`` never fall from window to window and rise by more than
    ``threshold`` from first to last; ``None`` otherwise (or with fewer than two values)."""
    seen = [v for v in values if v is not None]
    if len(seen) < 2:
        return None
    if any(b < a for a, b in itertools.pairwise(seen)):
        return None
    rise = seen[-1] - seen[0]
    return rise if rise > threshold else None


def saturation(spec: SearchSpec, windows: Sequence[Window]) -> str | None:
    """Why the target is over-saturated at this rate, or ``None``."""
    scheduled = sum(w.scheduled or 0 for w in windows)
    sent = sum(w.requests for w in windows)
    dropped = sum(w.dropped for w in windows)
    if scheduled > 0 and dropped > scheduled * spec.drop_tolerance_pct / 100.0:
        return (f"{dropped} of {scheduled} arrivals dropped (no free user), more than "
                f"{spec.drop_tolerance_pct:g} %")  # fmt: skip
    # Every arrival not sent is a shortfall: no edge allowance, which let an arrival per
    # window vanish without a count (the attainment counts them as misses, too).
    short = scheduled - sent - dropped
    if scheduled > 0 and short > scheduled * spec.achieved_tolerance_pct / 100.0:
        achieved = sum(w.achieved_qps for w in windows) / len(windows)
        offered = sum(w.offered_qps or 0.0 for w in windows) / len(windows)
        return (
            f"achieved {achieved:.3g} QPS < offered {offered:.3g} QPS by more than "
            f"{spec.achieved_tolerance_pct:g} % ({sent} of {scheduled} arrivals sent)"
        )
    rise = _rising([w.ttft_p50_ms for w in windows], spec.queue_growth_ms)
    if rise is not None:
        return f"the server's queue grows: TTFT p50 rose {rise:.0f} ms across the hold"
    rise = _rising([w.lateness_p99_ms for w in windows], spec.lateness_growth_ms)
    if rise is not None:
        return f"lateness grows: p99 rose {rise:.0f} ms across the hold"
    return None


def accounting_note(windows: Sequence[Window]) -> str:
    """``"; N arrivals unaccounted …"`` when the windows' counts do not balance, else ``""``.
    By the conservation law the unplaced arrivals are the lost plus the unrecorded ones; the
    note gives the total once and, where the counts tell, the two parts."""
    lost = sum(w.lost or 0 for w in windows)
    unrecorded = sum(max(0, w.unaccounted or 0) for w in windows)
    unplaced = max(sum(max(0, w.missing) for w in windows), lost + unrecorded)
    if not unplaced:
        return ""
    parts = [f"{n} {what}" for n, what in ((lost, "never sent"),
             (unrecorded, "dispatched without a record")) if n]  # fmt: skip
    detail = f" ({', '.join(parts)})" if parts else ""
    return (f"; {unplaced} scheduled arrivals have no record and no drop count{detail}, "
            "counted as misses")  # fmt: skip


def generator_cpu(spec: SearchSpec, cpu: Mapping[str, float]) -> str | None:
    """Why the generator's CPU disqualifies the probe (``cpu``: share of one core per worker)."""
    busy = {name: share for name, share in cpu.items() if share * 100 > spec.max_generator_cpu_pct}
    if not busy:
        return None
    name, share = max(busy.items(), key=lambda item: item[1])
    return (f"{name} used {share * 100:.0f} % of a core (limit "
            f"{spec.max_generator_cpu_pct:g} %)")  # fmt: skip


def judge(
    spec: SearchSpec,
    windows: Sequence[Window],
    cpu: Mapping[str, float],
    lateness_p99_ms: float | None,
    early: str | None = None,
) -> Judgement:
    """The probe's verdict from its windows, the workers' CPU and the pooled lateness p99;
    ``early`` is the reason the live watch stopped it, if it did."""
    good = sum(w.good for w in windows)
    arrivals = sum(w.arrivals for w in windows)
    pooled = wilson(good, arrivals, spec.confidence)
    across = t_interval([a for w in windows if (a := w.attainment) is not None], spec.confidence)
    deciding = pooled if spec.ci == "wilson" else across

    def verdict(kind: Verdict, reason: str) -> Judgement:
        return Judgement(kind, reason, deciding, pooled, across)

    if (why := generator_cpu(spec, cpu)) is not None:
        return verdict("generator-limited", why)
    # An early-stopped probe lost its in-flight requests: its counts would read as a shortfall.
    if early is None and (why := saturation(spec, windows)) is not None:
        return verdict("fail", f"over-saturated: {why}")
    if lateness_p99_ms is not None and lateness_p99_ms > spec.max_lateness_ms:
        return verdict("generator-limited",
                       f"lateness p99 {lateness_p99_ms:.0f} ms > {spec.max_lateness_ms:g} ms "
                       "without a saturated target: the client sent late")  # fmt: skip
    if early is not None:
        return verdict("fail", early)
    if arrivals == 0:
        return verdict("fail", "no request was measured")
    note = accounting_note(windows)
    if spec.criterion == "test":
        needed = threshold(arrivals, spec.floor, spec.confidence)
        text = (f"{good}/{arrivals} good, {needed} needed (exact binomial test: attainment "
                f"> {spec.floor * 100:g} % at {spec.confidence * 100:g} %){note}")  # fmt: skip
        return (
            verdict("pass", text) if good >= needed else verdict("fail", f"SLO attainment: {text}")
        )
    value = deciding.estimate if spec.criterion == "point" else deciding.low
    which = "point estimate" if spec.criterion == "point" else f"{spec.ci} lower bound"
    if value is None:  # a t interval from one window
        return verdict("fail", f"no {which}: too few windows")
    text = (f"{which} {value * 100:.1f} % vs {spec.goodput_min:g} % "
            f"({good}/{arrivals} good){note}")  # fmt: skip
    if value >= spec.goal:
        return verdict("pass", text)
    return verdict("fail", f"SLO attainment: {text}")
