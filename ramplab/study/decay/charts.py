"""The decay study's two charts: tokens/s per stream against offered QPS (one line per signing
mode, knees and the lock's capacity marked) and the locked mode's server time by phase."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from ramplab.report.charts import PALETTE, SEGMENT_COLOURS
from ramplab.results.breakdown import SERVER_LABELS
from ramplab.study.decay.knee import MIN_STREAMS, Knee
from ramplab.study.decay.steps import PHASES, ModeCurve

__all__ = ["rate_chart", "share_chart"]


def _layout(fig: go.Figure, title: str, y: str, **extra: Any) -> dict[str, Any]:
    fig.update_layout(
        title=title,
        xaxis_title="offered load (QPS)",
        yaxis_title=y,
        template="plotly_white",
        legend={"orientation": "h", "y": -0.2},
        **extra,
    )
    chart: dict[str, Any] = fig.to_plotly_json()
    return chart


def rate_chart(
    curves: Sequence[ModeCurve], knees: Sequence[Knee], capacity_qps: float | None
) -> dict[str, Any]:
    """Median tokens/s per stream per step, one line per variant; a knee is a diamond on its
    line at the threshold's crossing, the lock's capacity a dotted vertical line."""
    fig = go.Figure()
    for i, (curve, knee) in enumerate(zip(curves, knees, strict=True)):
        colour = PALETTE[i % len(PALETTE)]
        steps = [s for s in curve.steps if s.streams >= MIN_STREAMS]
        fig.add_trace(
            go.Scatter(
                x=[s.offered_qps for s in steps],
                y=[s.rate(50) for s in steps],
                name=f"{curve.name} (p50)",
                mode="lines+markers",
                line={"color": colour},
                hovertext=[f"{s.streams} streams" for s in steps],
            )
        )
        if knee.found:
            fig.add_trace(
                go.Scatter(
                    x=[knee.qps],
                    y=[knee.threshold],
                    name=f"{curve.name} knee {knee.qps:.3g} QPS "
                    f"[{knee.low_qps:g}, {knee.high_qps:g}]",
                    mode="markers",
                    marker={"symbol": "diamond", "size": 13, "color": colour},
                    error_x={
                        "type": "data",
                        "symmetric": False,
                        "array": [(knee.high_qps or 0.0) - (knee.qps or 0.0)],
                        "arrayminus": [(knee.qps or 0.0) - (knee.low_qps or 0.0)],
                    },
                )
            )
    if capacity_qps is not None:
        fig.add_vline(
            x=capacity_qps,
            line={"dash": "dot", "color": "#444"},
            annotation_text=f"lock capacity {capacity_qps:.3g} req/s (1 / sign time at low load)",
        )
    return _layout(
        fig, "Per-stream tokens/s vs offered QPS, by signing mode", "tokens/s per stream"
    )


def share_chart(curve: ModeCurve) -> dict[str, Any]:
    """The variant's server-side time per step, stacked by phase as % of the step's total."""
    fig = go.Figure()
    steps = [s for s in curve.steps if s.shares() is not None]
    for phase in PHASES:
        fig.add_trace(
            go.Bar(
                x=[s.offered_qps for s in steps],
                y=[100.0 * (s.shares() or {})[phase] for s in steps],
                name=SERVER_LABELS[phase].removeprefix("server: "),
                marker={"color": SEGMENT_COLOURS[f"s:{phase}"]},
            )
        )
    return _layout(
        fig,
        f"Where the server's time goes, {curve.name} (% of server-side time per step)",
        "% of server-side time",
        barmode="stack",
        xaxis={"type": "category"},
    )
