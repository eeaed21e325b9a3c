"""The run second by second (``results/timeline.py``): requests sent and failed per second,
requests in flight, TTFT p50/p99 — three panels on one time axis, the steps' measured windows
shaded, so a reader sees what happened within a step (a queue building, an error burst), not
only its totals."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ramplab.report.charts.base import Chart, LabelledRun, colour, layout
from ramplab.results.digest import Floats
from ramplab.results.offered import offered_load

__all__ = ["timeline"]


def _list(values: Floats) -> list[float | None]:
    return [None if np.isnan(v) else float(v) for v in values.tolist()]


def timeline(runs: Sequence[LabelledRun]) -> Chart:
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        subplot_titles=("requests per second", "in flight (mean per second)",
                                        "TTFT (ms)"))  # fmt: skip
    several = len(runs) > 1
    for i, run in enumerate(runs):
        t = run.digest.timeline
        if t.sent.size == 0:
            continue
        hue = run.colour or colour(i)
        x = t.seconds.tolist()
        lines: list[tuple[int, Sequence[float | None], str, str, str]] = [
            (1, t.sent.tolist(), "sent/s", hue if several else colour(0), "solid"),
            (2, t.in_flight.tolist(), "in flight", hue if several else colour(2), "solid"),
            (3, _list(t.ttft_p99_ms), "TTFT p99", hue if several else colour(4), "dot"),
        ]
        if t.failed.any():
            lines.append((1, t.failed.tolist(), "failed/s", hue if several else colour(1), "dot"))
        if not several:
            lines.append((3, _list(t.ttft_p50_ms), "TTFT p50", colour(3), "solid"))
        for row, y, what, line_colour, dash in lines:
            fig.add_trace(
                go.Scatter(x=x, y=list(y), mode="lines",
                           name=f"{run.label} · {what}" if several else what,
                           line={"color": line_colour, "dash": dash, "width": 1.5},
                           legendgroup=run.group or run.label),
                row=row, col=1,
            )  # fmt: skip
    if runs:
        origin = runs[0].summary
        for step in origin.steps:
            start = step.start_s + step.warmup_s
            value, unit = offered_load(step)
            for row in (1, 2, 3):
                label = {"annotation_text": f"{value:g} {unit}",
                         "annotation_position": "top left"} if row == 1 else {}  # fmt: skip
                fig.add_vrect(x0=start, x1=start + step.measured_s, fillcolor="#888",
                              opacity=0.08, line={"color": "#999", "width": 1}, row=row, col=1,
                              **label)  # fmt: skip
    title = "The run second by second"
    fig = layout(fig, title, "", "", height=640)
    fig.update_xaxes(title_text="seconds since the run's start", row=3, col=1)
    fig.update_yaxes(rangemode="tozero")
    return Chart("timeline", title, fig,
                 "sent: by first send; failed and TTFT: by intended start; in flight: time-"
                 "average within each second; TTFT percentiles within 1 % (per-step figures "
                 "are exact); shaded: each step's measured window, labelled with its offered "
                 "load")  # fmt: skip
