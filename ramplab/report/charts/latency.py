"""Latency charts: percentiles per step, the coordinated-omission gap, the reasoning phase, TTFT
by turn, and the CDFs.

One run shows p50, p90, p99 and p99.9; several overlaid show p50 and p99 only (solid and dotted),
a variant's repeats as one band each — never a line per run × percentile.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from ramplab.report.charts.base import (
    Chart,
    LabelledRun,
    colour,
    layout,
    per_step,
    slo_lines,
    step_layout,
)
from ramplab.results.digest import Floats
from ramplab.results.offered import offered_load

__all__ = ["cdf", "latency", "omission", "reasoning", "ttft_by_turn"]

PERCENTILES = (("p50", "p50", "solid"), ("p90", "p90", "dash"), ("p99", "p99", "dot"),
               ("p999", "p99.9", "dashdot"))  # fmt: skip
OVERLAID = (("p50", "p50", "solid"), ("p99", "p99", "dot"))
CDF_POINTS = 400  # quantiles drawn per CDF curve: exact values at those ranks


def _percentiles(runs: Sequence[LabelledRun]) -> tuple[tuple[str, str, str], ...]:
    return PERCENTILES if len(runs) == 1 else OVERLAID


def latency(runs: Sequence[LabelledRun], key: str, field: str, title: str) -> Chart:
    fig = go.Figure()
    for j, (attr, label, dash) in enumerate(_percentiles(runs)):

        def ys(run: LabelledRun, attr: str = attr) -> list[float | None]:
            return [getattr(getattr(s, field), attr) for s in run.summary.steps]

        per_step(fig, runs, label, ys, j, dash)
    slo_lines(fig, runs, field)
    return Chart(key, title, step_layout(fig, runs, f"{title}: percentiles", "ms"),
                 per_step=True)  # fmt: skip


def omission(runs: Sequence[LabelledRun]) -> Chart:
    """TTFT from the intended start minus TTFT from the send, p50 and p99 per step: what the
    generator's own delay adds to each percentile (coordinated omission)."""
    fig = go.Figure()
    for j, (attr, dash) in enumerate((("p50", "solid"), ("p99", "dot"))):

        def gap(run: LabelledRun, attr: str = attr) -> list[float | None]:
            out: list[float | None] = []
            for s in run.summary.steps:
                intended, send = getattr(s.ttft_ms, attr), getattr(s.ttft_send_ms, attr)
                out.append(None if intended is None or send is None else intended - send)
            return out

        per_step(fig, runs, f"TTFT {attr}: from intended − from send", gap, j, dash)
    title = "Coordinated omission: TTFT from the intended start minus from the send"
    return Chart("omission", title, step_layout(fig, runs, title, "ms added"),
                 "what the client added before the final send — its lateness, and earlier "
                 "attempts and back-off when retried — to each TTFT percentile: near 0, TTFT "
                 "from the send tells the whole story", per_step=True)  # fmt: skip


def reasoning(runs: Sequence[LabelledRun]) -> Chart:
    """Time to first output (``ttft_ms``) against time to first answer token, p50 and p99."""
    fig = go.Figure()
    for j, (field, what) in enumerate((("ttft_ms", "first output"),
                                       ("answer_ttft_ms", "first answer"))):  # fmt: skip
        for k, (attr, dash) in enumerate((("p50", "solid"), ("p99", "dot"))):

            def ys(run: LabelledRun, field: str = field, attr: str = attr) -> list[float | None]:
                return [getattr(getattr(s, field), attr) for s in run.summary.steps]

            per_step(fig, runs, f"{what} {attr}", ys, 2 * j + k, dash)
    return Chart("reasoning", "Reasoning: first output vs first answer token",
                 step_layout(fig, runs, "Time to first output vs first answer token", "ms"),
                 "the gap is the reasoning phase (docs/workloads.md)", per_step=True)  # fmt: skip


def ttft_by_turn(runs: Sequence[LabelledRun]) -> Chart:
    """Multi-turn sessions: TTFT percentiles per turn index (x: the turn, not the load)."""
    several = len(runs) > 1
    fig = go.Figure()
    for i, run in enumerate(runs):
        sessions = run.summary.sessions
        if sessions is None:
            continue
        x = [float(t.turn) for t in sessions.turns]
        for j, (attr, label, dash) in enumerate(PERCENTILES[:3]):
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=[getattr(t.ttft_ms, attr) for t in sessions.turns],
                    name=f"{run.label} · {label}" if several else label,
                    mode="lines+markers",
                    line={"color": (run.colour or colour(i)) if several else colour(j),
                          "dash": dash if several else "solid"},
                    text=[f"{t.ok} ok of {t.requests}" for t in sessions.turns],
                    legendgroup=run.label,
                )
            )  # fmt: skip
    fig = layout(fig, "TTFT by turn (multi-turn sessions)", "turn", "ms")
    fig.update_xaxes(dtick=1)
    note = "each turn sends the whole history: its prompt grows by the answers before it"
    return Chart("ttft_by_turn", "TTFT by turn", fig, note)


def _cdf(values: Floats, *, owned: bool = False) -> tuple[list[float], list[float]]:
    """``CDF_POINTS`` exact quantiles; ``owned``: ``values`` is a temporary the selection may
    reorder in place (no copy: a million records' pooled gaps are 120 MB)."""
    if values.size == 0:
        return [], []
    q = np.linspace(0.0, 1.0, min(CDF_POINTS, values.size))
    quantiles = np.quantile(values, q, overwrite_input=owned)
    return [float(v) for v in quantiles], [float(v) for v in q]


def cdf(runs: Sequence[LabelledRun], key: str, field: str, title: str) -> Chart:
    """One curve per run over every measured step; one run: one curve per step as well."""
    fig = go.Figure()
    # Each curve's quantiles taken as it comes: no pooled array outlives its curve.
    curves: list[tuple[str, tuple[list[float], list[float]], str, str, str]] = []
    for i, run in enumerate(runs):
        pooled = _cdf(run.digest.pooled(field), owned=True)
        name = run.label if len(runs) > 1 else "all steps"
        curves.append((name, pooled, run.colour or colour(i), "solid", run.group or run.label))
        if len(runs) == 1 and len(run.digest.steps) > 1:
            for j, (step, d) in enumerate(zip(run.summary.steps, run.digest.steps, strict=True)):
                value, unit = offered_load(step)
                curve = _cdf(getattr(d, field))
                curves.append((f"@ {value:g} {unit}", curve, colour(j + 1), "dot", run.label))
    for name, (x, y), hue, dash, group in curves:
        if x:
            fig.add_trace(go.Scatter(x=x, y=y, name=name, mode="lines", legendgroup=group,
                                     line={"color": hue, "dash": dash}))  # fmt: skip
    slo_lines(fig, runs, field, axis="x", log=True)
    return Chart(key, title, layout(fig, f"{title}: CDF", "ms (log)", "fraction ≤ x",
                                    xaxis_type="log"))  # fmt: skip
