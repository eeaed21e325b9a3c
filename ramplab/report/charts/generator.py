"""What went wrong or was held back, per step: errors and retried attempts, retry amplification,
the generator's lateness, dropped arrivals.

A chart with nothing to show (no failure and no retried attempt at any step of any run,
amplification 1, no drop) is not drawn as a flat line on a −1…1 axis: ``quiet`` collapses those
into one sentence (``no errors, retries or dropped arrivals at any step``) where they stood.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from ramplab.report.charts.base import Chart, LabelledRun, per_step, step_layout
from ramplab.results.summary import StepStats

__all__ = ["QUIET", "dropped", "errors", "lateness", "quiet", "quiet_sentence", "retries"]

# What a collapsed chart did not see, as the sentence names it.
QUIET = {"errors": "errors", "retries": "retries", "dropped": "dropped arrivals"}


def _share(count: int, step: StepStats) -> float | None:
    return 100.0 * count / step.requests if step.requests else None


def _no_errors(runs: Sequence[LabelledRun]) -> bool:
    return all(not s.errors for r in runs for s in r.summary.steps) and all(
        not d.retried for r in runs for d in r.digest.steps
    )


def _no_retries(runs: Sequence[LabelledRun]) -> bool:
    return all((s.retry_amplification or 1.0) <= 1.0 for r in runs for s in r.summary.steps)


def _no_drops(runs: Sequence[LabelledRun]) -> bool:
    return all(not s.drop_ratio for r in runs for s in r.summary.steps)


def errors(runs: Sequence[LabelledRun]) -> Chart:
    fig = go.Figure()
    statuses = sorted({k for r in runs for s in r.summary.steps for k in s.errors})
    retried = sorted({k for r in runs for d in r.digest.steps for k in d.retried})
    for j, status in enumerate(statuses):

        def failed(run: LabelledRun, status: str = status) -> list[float | None]:
            return [_share(s.errors.get(status, 0), s) for s in run.summary.steps]

        per_step(fig, runs, f"failed {status}", failed, j)
    for j, status in enumerate(retried):

        def ys(run: LabelledRun, status: str = status) -> list[float | None]:
            pairs = zip(run.summary.steps, run.digest.steps, strict=True)
            return [_share(d.retried.get(status, 0), s) for s, d in pairs]

        per_step(fig, runs, f"retried {status}", ys, len(statuses) + j, "dash")
    title = "Errors and retried attempts by status"
    note = "failed: final outcome after retries; retried: attempts that were retried"
    return Chart("errors", title, step_layout(fig, runs, title, "% of requests"), note,
                 per_step=True)  # fmt: skip


def retries(runs: Sequence[LabelledRun]) -> Chart:
    fig = go.Figure()
    per_step(fig, runs, "attempts ÷ requests",
             lambda r: [s.retry_amplification for s in r.summary.steps], 0)  # fmt: skip
    title = "Retry amplification"
    return Chart("retries", title, step_layout(fig, runs, title, "attempts per request"),
                 per_step=True)  # fmt: skip


def lateness(runs: Sequence[LabelledRun]) -> Chart:
    fig = go.Figure()
    for j, (attr, dash) in enumerate((("p50", "solid"), ("p99", "dot"), ("max", "dashdot"))):

        def ys(run: LabelledRun, attr: str = attr) -> list[float | None]:
            return [getattr(s.lateness_ms, attr) for s in run.summary.steps]

        per_step(fig, runs, f"lateness {attr}", ys, j, dash if len(runs) > 1 else "solid")
    title = "Generator lateness (intended → actual send)"
    return Chart("lateness", title, step_layout(fig, runs, title, "ms"),
                 "how late the generator sent: large values mean coordinated omission",
                 per_step=True)  # fmt: skip


def dropped(runs: Sequence[LabelledRun]) -> Chart:
    fig = go.Figure()
    per_step(fig, runs, "dropped",
             lambda r: [None if s.drop_ratio is None else 100.0 * s.drop_ratio
                        for s in r.summary.steps], 0)  # fmt: skip
    title = "Dropped arrivals"
    return Chart("dropped", title, step_layout(fig, runs, title, "% of scheduled"),
                 "arrivals of the schedule no free user could take", per_step=True)  # fmt: skip


def quiet(runs: Sequence[LabelledRun]) -> list[str]:
    """The keys of the charts that would show nothing (``QUIET``'s order)."""
    checks = {"errors": _no_errors, "retries": _no_retries, "dropped": _no_drops}
    return [key for key in QUIET if checks[key](runs)]


def quiet_sentence(keys: Sequence[str]) -> str:
    """``No errors, retries or dropped arrivals at any step.``"""
    names = [QUIET[k] for k in keys]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
    return f"No {listed} at any step (nothing to chart)."
