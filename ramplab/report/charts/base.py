"""What every chart shares: the runs to draw, the chart, the layout, the offered-load axis and
the per-step series (one run's line, or a variant's repeats as a band).

The x-axis of a per-step chart is logarithmic when the offered loads form a geometric ramp
(``log_axis``): loads spanning ≥ 10× whose steps are more even in ratio than in difference (1, 2,
5, 10, 20, 50, 100 QPS), so the low steps are not squeezed into the left fifth; a linear ramp
(10, 20, … 100) stays linear.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import plotly.graph_objects as go

from ramplab.results.digest import RunDigest, read_digest
from ramplab.results.offered import offered_load
from ramplab.results.summary import RunSummary
from ramplab.runs.rundir import RunDir

__all__ = [
    "PALETTE",
    "Chart",
    "LabelledRun",
    "Values",
    "colour",
    "layout",
    "log_axis",
    "per_step",
    "slo_lines",
    "step_layout",
    "xs",
]

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
           "#17becf", "#7f7f7f", "#bcbd22")  # fmt: skip
SLO_COLOUR = "#444444"
# The SLO's figures as a chart names them.
SLO_NAMES = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "ttlt_ms": "TTLT",
             "answer_ttft_ms": "first answer token"}  # fmt: skip
GEOMETRIC_SPAN = 10.0  # highest ÷ lowest offered load from which a ramp may be drawn on log x

Values = Sequence[float | None]


@dataclass(frozen=True)
class LabelledRun:
    """One run to draw: a legend label, its summary and the digest of its records. ``group``
    names the variant whose repeats it belongs to: runs of one group are drawn as one band."""

    label: str
    summary: RunSummary
    digest: RunDigest
    colour: str | None = None  # overlaid runs: this colour instead of the palette's next one
    group: str | None = None

    @classmethod
    def load(
        cls,
        run_dir: Path,
        label: str | None = None,
        summary: RunSummary | None = None,
        colour: str | None = None,
        group: str | None = None,
    ) -> LabelledRun:
        """From a run directory: ``summary.json`` (or the one given) and one streamed pass over
        records. ``colour`` lets runs share one (an experiment's repeats of a variant)."""
        if summary is None:
            summary = RunDir(run_dir).read_summary()
        digest = read_digest(RunDir(run_dir).records, summary)
        return cls(label or run_dir.name, summary, digest, colour, group)


@dataclass(frozen=True)
class Chart:
    """One figure: ``key`` is stable (``"ttft"``, ``"phases"``) and names its ``<div>``.
    ``figure`` is ``None`` for charts that had nothing to draw, collapsed into the sentence in
    ``note``; ``per_step`` charts have the offered load on x."""

    key: str
    title: str
    figure: go.Figure | None
    note: str = ""
    per_step: bool = False


def colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def xs(summary: RunSummary) -> list[float]:
    return [offered_load(s)[0] for s in summary.steps]


def x_title(runs: Sequence[LabelledRun]) -> str:
    units = {offered_load(s)[1] for r in runs for s in r.summary.steps}
    return "offered load (" + ", ".join(sorted(units) or ["QPS"]) + ")"


def log_axis(loads: Sequence[float]) -> bool:
    """Whether ``loads`` are a geometric ramp: ≥ 10× from lowest to highest and their steps
    more even in ratio than in difference (coefficient of variation of log steps lower)."""
    values = sorted(set(loads))
    if len(values) < 2 or values[0] <= 0 or values[-1] / values[0] < GEOMETRIC_SPAN:
        return False
    if len(values) == 2:
        return True
    linear, ratio = np.diff(values), np.diff(np.log(values))
    return float(ratio.std() / ratio.mean()) < float(linear.std() / linear.mean())


def layout(fig: go.Figure, title: str, x: str, y: str, **extra: Any) -> go.Figure:
    settings: dict[str, Any] = {
        "title": {"text": title, "x": 0.01},
        "xaxis_title": x,
        "yaxis_title": y,
        "template": "plotly_white",
        "height": 380,
        "margin": {"l": 60, "r": 20, "t": 50, "b": 50},
        "legend": {"orientation": "h", "y": -0.2},
        "hovermode": "closest",
    }
    fig.update_layout(**{**settings, **extra})
    return fig


def step_layout(
    fig: go.Figure, runs: Sequence[LabelledRun], title: str, y: str, **extra: Any
) -> go.Figure:
    """A per-step chart's layout: the offered load on x, logarithmic for a geometric ramp; y
    from 0, so a change of 0.2 % does not fill the chart's height."""
    loads = sorted({x for r in runs for x in xs(r.summary)})
    log = log_axis(loads)
    label = x_title(runs) + (" (log)" if log else "")
    settings: dict[str, Any] = {"xaxis_type": "log" if log else "linear",
                                "yaxis_rangemode": "tozero", **extra}  # fmt: skip
    if log:  # a tick at each step's load, not plotly's 2 … 9 between the decades
        settings["xaxis"] = {"tickvals": loads, "ticktext": [f"{x:g}" for x in loads]}
    return layout(fig, title, label, y, **settings)


def _groups(runs: Sequence[LabelledRun]) -> list[tuple[int, list[LabelledRun]]]:
    """(index of the first run, the runs) per group, in order; a run without a group alone."""
    out: dict[str, tuple[int, list[LabelledRun]]] = {}
    for i, run in enumerate(runs):
        out.setdefault(run.group or f"\0{i}", (i, []))[1].append(run)
    return list(out.values())


def _fade(hex_colour: str, alpha: float) -> str:
    r, g, b = (int(hex_colour[k : k + 2], 16) for k in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def per_step(
    fig: go.Figure,
    runs: Sequence[LabelledRun],
    what: str,
    values: Callable[[LabelledRun], Values],
    series: int,
    dash: str = "solid",
) -> None:
    """One series per step of every run: one run draws a line coloured by ``series``; several
    draw one colour per run (or variant) with ``dash`` telling the series apart, and the repeats
    of one variant as one band from their lowest to their highest value at each load."""
    several = len(runs) > 1
    for first, members in _groups(runs):
        hue = (members[0].colour or colour(first)) if several else colour(series)
        name = f"{members[0].group or members[0].label} · {what}" if several else what
        loads = [xs(r.summary) for r in members]
        if len(members) == 1 or any(x != loads[0] for x in loads):
            for run in members:
                label = f"{run.label} · {what}" if several else what
                _line(fig, run, xs(run.summary), values(run), label, hue, dash)
            continue
        _band(fig, members, loads[0], [values(r) for r in members], name, hue, dash)


def _line(
    fig: go.Figure,
    run: LabelledRun,
    x: Sequence[float],
    y: Values,
    name: str,
    hue: str,
    dash: str,
) -> None:
    fig.add_trace(
        go.Scatter(
            x=list(x),
            y=list(y),
            name=name,
            mode="lines+markers",
            line={"color": hue, "dash": dash},
            text=[f"step {s.index}" for s in run.summary.steps],
            legendgroup=run.group or run.label,
        )
    )


def _band(
    fig: go.Figure,
    members: Sequence[LabelledRun],
    x: Sequence[float],
    ys: Sequence[Values],
    name: str,
    hue: str,
    dash: str,
) -> None:
    """The repeats' range at each load, edges in the variant's colour; nothing averaged."""
    columns = [[v for v in column if v is not None] for column in zip(*ys, strict=True)]
    low = [min(c) if c else None for c in columns]
    high = [max(c) if c else None for c in columns]
    group = members[0].group or members[0].label
    label = f"{name} ({len(members)} repeats, min–max)"
    fig.add_trace(go.Scatter(x=list(x), y=high, name=label, mode="lines+markers",
                             line={"color": hue, "dash": dash, "width": 1},
                             legendgroup=group, showlegend=False))  # fmt: skip
    fig.add_trace(go.Scatter(x=list(x), y=low, name=label, mode="lines+markers",
                             line={"color": hue, "dash": dash, "width": 1}, fill="tonexty",
                             fillcolor=_fade(hue, 0.2), legendgroup=group))  # fmt: skip


def slo_lines(
    fig: go.Figure, runs: Sequence[LabelledRun], field: str, axis: str = "y", log: bool = False
) -> None:
    """A dashed line at each SLO limit the runs set on ``field`` (horizontal on a per-step
    latency chart, vertical on a CDF), labelled ``SLO TTFT 500 ms``; ``log``: that axis is
    logarithmic (plotly places a shape at the value, an annotation at its log10)."""
    limits = sorted(
        {r.summary.slo[field] for r in runs if r.summary.slo and field in r.summary.slo}
    )
    for limit in limits:
        text = f"SLO {SLO_NAMES.get(field, field)} {limit:g} ms"
        line = {"color": SLO_COLOUR, "dash": "dash", "width": 1.5}
        at = float(np.log10(limit)) if log else limit
        if axis == "y":
            fig.add_hline(y=limit, line=line)
            fig.add_annotation(
                y=at,
                x=0.0,
                xref="paper",
                text=text,
                showarrow=False,
                xanchor="left",
                yanchor="bottom",
                font={"color": SLO_COLOUR},
            )
        else:
            fig.add_vline(x=limit, line=line)
            fig.add_annotation(
                x=at,
                y=1.0,
                yref="paper",
                text=text,
                showarrow=False,
                xanchor="left",
                yanchor="bottom",
                font={"color": SLO_COLOUR},
            )
