"""The report's charts (plotly), for one run or several overlaid: the public charting API.

Every chart takes a list of labelled runs, so the same call draws one run's report and an
experiment's comparison::

    from ramplab.report.charts import LabelledRun, run_charts, charts_html, plotly_script

    runs = [LabelledRun.load(Path("results/a"), "locked"), LabelledRun.load(Path("results/b"))]
    charts = run_charts(runs)            # list[Chart]: key, title, plotly Figure
    body = charts_html(charts)           # the <div>s and their newPlot calls, no plotly.js
    page = f"<html><head>{plotly_script()}</head><body>{body}</body></html>"  # inlined once

Per-step charts put the offered load on the x-axis (``offered.offered_load``: the step's target
QPS; users for a closed loop), never the step number, so runs with different ramps line up.
Data comes from each run's ``RunSummary`` (percentiles, rates, counts) and its ``RunDigest``
(distributions, phases, retries: ``digest.py``, one pass over the records, a batch at a time).
One run: colours tell percentiles apart; several runs: colours tell runs apart and the dash
tells the percentile. Nothing is drawn that was not measured: a missing value is a gap.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import plotly.graph_objects as go
import plotly.offline

from ramplab.results.breakdown import CLIENT_LABELS, SERVER_LABELS, breakdowns
from ramplab.results.digest import Floats, RunDigest, StepDigest, read_digest
from ramplab.results.offered import offered_load
from ramplab.results.summary import RunSummary, StepStats
from ramplab.runs.rundir import RunDir

__all__ = [
    "PALETTE",
    "Chart",
    "LabelledRun",
    "charts_html",
    "plotly_script",
    "run_charts",
]

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
           "#17becf", "#7f7f7f", "#bcbd22")  # fmt: skip
PERCENTILES = (("p50", "p50", "solid"), ("p90", "p90", "dash"), ("p99", "p99", "dot"),
               ("p999", "p99.9", "dashdot"))  # fmt: skip
LATENCIES = (
    ("ttft", "ttft_ms", "TTFT (from the intended start)"),
    ("itl", "itl_ms", "ITL (per token)"),
    ("tpot", "tpot_ms", "TPOT"),
    ("ttlt", "ttlt_ms", "TTLT (from the intended start)"),
)
# Client segments in blues and greys, the server's in warm colours, "before the server" pale.
SEGMENT_COLOURS = {
    "c:lateness": "#9e9ac8", "c:retries": "#6a51a3", "c:dns": "#c6dbef", "c:connect": "#6baed6",
    "c:tls": "#2171b5", "c:send": "#08306b", "c:wait": "#74c476", "c:first_token": "#31a354",
    "c:stream": "#006d2c", "s:before": "#e0e0e0", "s:auth": "#fdd0a2", "s:ratelimit": "#fdae6b",
    "s:queue": "#e6550d", "s:prefill": "#fd8d3c", "s:decode": "#fdbe85", "s:sign_queue": "#bcbddc",
    "s:lock_wait": "#a50f15", "s:sign": "#de2d26", "s:unseen": "#bdbdbd",
}  # fmt: skip
CDF_POINTS = 400  # quantiles drawn per CDF curve: exact values at those ranks
_CONFIG = {"displaylogo": False, "responsive": True}


@dataclass(frozen=True)
class LabelledRun:
    """One run to draw: a legend label, its summary and the digest of its records."""

    label: str
    summary: RunSummary
    digest: RunDigest
    colour: str | None = None  # overlaid runs: this colour instead of the palette's next one

    @classmethod
    def load(
        cls,
        run_dir: Path,
        label: str | None = None,
        summary: RunSummary | None = None,
        colour: str | None = None,
    ) -> LabelledRun:
        """From a run directory: ``summary.json`` (or the one given) and one streamed pass over
        records. ``colour`` lets runs share one (an experiment's repeats of a
        variant)."""
        if summary is None:
            summary = RunDir(run_dir).read_summary()
        return cls(
            label or run_dir.name, summary, read_digest(RunDir(run_dir).records, summary), colour
        )


@dataclass(frozen=True)
class Chart:
    """One figure: ``key`` is stable (``"ttft"``, ``"phases"``) and names its ``<div>``."""

    key: str
    title: str
    figure: go.Figure
    note: str = ""


def _colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _run_colour(runs: Sequence[LabelledRun], i: int) -> str:
    return runs[i].colour or _colour(i)


def _xs(summary: RunSummary) -> list[float]:
    return [offered_load(s)[0] for s in summary.steps]


def _x_title(runs: Sequence[LabelledRun]) -> str:
    units = {offered_load(s)[1] for r in runs for s in r.summary.steps}
    return "offered load (" + ", ".join(sorted(units) or ["QPS"]) + ")"


def _layout(fig: go.Figure, title: str, x: str, y: str, **extra: Any) -> go.Figure:
    layout: dict[str, Any] = {
        "title": {"text": title, "x": 0.01},
        "xaxis_title": x,
        "yaxis_title": y,
        "template": "plotly_white",
        "height": 380,
        "margin": {"l": 60, "r": 20, "t": 50, "b": 50},
        "legend": {"orientation": "h", "y": -0.2},
        "hovermode": "closest",
    }
    fig.update_layout(**{**layout, **extra})
    return fig


def _name(run: LabelledRun, what: str, several: bool) -> str:
    return f"{run.label} · {what}" if several else what


def _steps_hover(summary: RunSummary) -> list[str]:
    return [f"step {s.index}" for s in summary.steps]


def _line(
    fig: go.Figure,
    run: LabelledRun,
    ys: Sequence[float | None],
    name: str,
    colour: str,
    dash: str = "solid",
    xs: Sequence[float] | None = None,
) -> None:
    fig.add_trace(
        go.Scatter(
            x=list(xs if xs is not None else _xs(run.summary)),
            y=list(ys),
            name=name,
            mode="lines+markers",
            line={"color": colour, "dash": dash},
            text=_steps_hover(run.summary),
            legendgroup=run.label,
        )
    )


def _per_step(runs: Sequence[LabelledRun]) -> tuple[bool, Callable[[int, int], str]]:
    """(several runs?, colour of (run, series)): one run colours its series, several their runs."""
    several = len(runs) > 1

    def colour(run_i: int, series_i: int) -> str:
        return _run_colour(runs, run_i) if several else _colour(series_i)

    return several, colour


def throughput(runs: Sequence[LabelledRun]) -> Chart:
    several, colour = _per_step(runs)
    fig = go.Figure()
    xs_all = [x for r in runs for x in _xs(r.summary)]
    if xs_all:
        top = max(xs_all)
        fig.add_trace(go.Scatter(x=[0, top], y=[0, top], name="offered (y = x)", mode="lines",
                                 line={"color": "#999", "dash": "dot"}))  # fmt: skip
    for i, run in enumerate(runs):
        steps = run.summary.steps
        _line(fig, run, [s.achieved_qps for s in steps], _name(run, "achieved", several),
              colour(i, 0))  # fmt: skip
        _line(fig, run, [s.goodput_qps for s in steps], _name(run, "goodput", several),
              colour(i, 2), "dash")  # fmt: skip
    return Chart("throughput", "Achieved and goodput vs offered",
                 _layout(fig, "Achieved and goodput vs offered", _x_title(runs), "QPS"),
                 "goodput: requests that met every SLO (or succeeded, without SLOs)")  # fmt: skip


def latency(runs: Sequence[LabelledRun], key: str, field: str, title: str) -> Chart:
    several, colour = _per_step(runs)
    fig = go.Figure()
    for i, run in enumerate(runs):
        for j, (attr, label, dash) in enumerate(PERCENTILES):
            ys = [getattr(getattr(s, field), attr) for s in run.summary.steps]
            _line(fig, run, ys, _name(run, label, several), colour(i, j),
                  dash if several else "solid")  # fmt: skip
    return Chart(key, title, _layout(fig, f"{title}: percentiles", _x_title(runs), "ms"))


def _stream_rates(d: StepDigest) -> tuple[float | None, float | None]:
    rates = d.stream_tokens_per_s
    if rates.size == 0:
        return None, None
    p10, p50 = np.percentile(rates, [10, 50])
    return float(p50), float(p10)


def stream_rate(runs: Sequence[LabelledRun]) -> Chart:
    several, colour = _per_step(runs)
    fig = go.Figure()
    for i, run in enumerate(runs):
        rates = [_stream_rates(d) for d in run.digest.steps]
        _line(fig, run, [p50 for p50, _ in rates], _name(run, "p50 stream", several),
              colour(i, 0))  # fmt: skip
        _line(fig, run, [p10 for _, p10 in rates], _name(run, "p10 (slowest 10 %)", several),
              colour(i, 1), "dash")  # fmt: skip
    title = "Per-stream output tokens/s"
    return Chart("stream_rate", title, _layout(fig, title, _x_title(runs), "tokens/s"),
                 "output tokens ÷ TTLT from the final send, per successful stream")  # fmt: skip


def _share(count: int, step: StepStats) -> float | None:
    return 100.0 * count / step.requests if step.requests else None


def errors(runs: Sequence[LabelledRun]) -> Chart:
    several, colour = _per_step(runs)
    fig = go.Figure()
    for i, run in enumerate(runs):
        steps = run.summary.steps
        statuses = sorted({k for s in steps for k in s.errors})
        if not statuses:
            ys = [_share(0, s) for s in steps]
            _line(fig, run, ys, _name(run, "failed (none)", several), colour(i, 0))
        for j, status in enumerate(statuses):
            ys = [_share(s.errors.get(status, 0), s) for s in steps]
            _line(fig, run, ys, _name(run, f"failed {status}", several), colour(i, j))
        retried = sorted({k for d in run.digest.steps for k in d.retried})
        for j, status in enumerate(retried):
            ys = [
                _share(d.retried.get(status, 0), s)
                for s, d in zip(steps, run.digest.steps, strict=True)
            ]
            _line(fig, run, ys, _name(run, f"retried {status}", several),
                  colour(i, len(statuses) + j), "dash")  # fmt: skip
    title = "Errors and retried attempts by status"
    note = "failed: final outcome after retries; retried: attempts that were retried"
    return Chart("errors", title, _layout(fig, title, _x_title(runs), "% of requests"), note)


def retries(runs: Sequence[LabelledRun]) -> Chart:
    several, colour = _per_step(runs)
    fig = go.Figure()
    for i, run in enumerate(runs):
        steps = run.summary.steps
        _line(fig, run, [s.retry_amplification for s in steps],
              _name(run, "attempts ÷ requests", several), colour(i, 0))  # fmt: skip
    title = "Retry amplification"
    return Chart("retries", title, _layout(fig, title, _x_title(runs), "attempts per request"))


def lateness(runs: Sequence[LabelledRun]) -> Chart:
    several, colour = _per_step(runs)
    fig = go.Figure()
    for i, run in enumerate(runs):
        for j, (attr, label) in enumerate((("p50", "p50"), ("p99", "p99"), ("max", "max"))):
            ys = [getattr(s.lateness_ms, attr) for s in run.summary.steps]
            dash = ("solid", "dot", "dashdot")[j] if several else "solid"
            _line(fig, run, ys, _name(run, f"lateness {label}", several), colour(i, j), dash)
    title = "Generator lateness (intended → actual send)"
    return Chart("lateness", title, _layout(fig, title, _x_title(runs), "ms"),
                 "how late the generator sent: large values mean coordinated omission")  # fmt: skip


def omission(runs: Sequence[LabelledRun]) -> Chart:
    several, colour = _per_step(runs)
    fig = go.Figure()
    for i, run in enumerate(runs):
        for j, (field, label, dash) in enumerate(
            (("ttft_ms", "from intended start", "solid"), ("ttft_send_ms", "from send", "dash"))
        ):
            for k, attr in enumerate(("p50", "p99")):
                ys = [getattr(getattr(s, field), attr) for s in run.summary.steps]
                _line(fig, run, ys, _name(run, f"TTFT {attr} {label}", several),
                      colour(i, 2 * k + j), dash)  # fmt: skip
    title = "TTFT from the intended start vs from the send"
    return Chart("omission", title, _layout(fig, title, _x_title(runs), "ms"),
                 "the gap between the two is the generator's own delay")  # fmt: skip


def dropped(runs: Sequence[LabelledRun]) -> Chart:
    several, colour = _per_step(runs)
    fig = go.Figure()
    for i, run in enumerate(runs):
        steps = run.summary.steps
        ys = [100.0 * s.drop_ratio if s.drop_ratio is not None else None for s in steps]
        _line(fig, run, ys, _name(run, "dropped", several), colour(i, 0))
    title = "Dropped arrivals"
    return Chart("dropped", title, _layout(fig, title, _x_title(runs), "% of scheduled"),
                 "arrivals of the schedule no free user could take")  # fmt: skip


def ttft_by_turn(runs: Sequence[LabelledRun]) -> Chart:
    """Multi-turn sessions: TTFT percentiles per turn index (x: the turn, not the load)."""
    several = len(runs) > 1
    fig = go.Figure()
    for i, run in enumerate(runs):
        sessions = run.summary.sessions
        if sessions is None:
            continue
        xs = [float(t.turn) for t in sessions.turns]
        for j, (attr, label, dash) in enumerate(PERCENTILES[:3]):
            ys = [getattr(t.ttft_ms, attr) for t in sessions.turns]
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=ys,
                    name=_name(run, label, several),
                    mode="lines+markers",
                    line={"color": _run_colour(runs, i) if several else _colour(j),
                          "dash": dash if several else "solid"},
                    text=[f"{t.ok} ok of {t.requests}" for t in sessions.turns],
                    legendgroup=run.label,
                )
            )  # fmt: skip
    title = "TTFT by turn"
    fig = _layout(fig, f"{title} (multi-turn sessions)", "turn", "ms")
    fig.update_xaxes(dtick=1)
    note = "each turn sends the whole history: its prompt grows by the answers before it"
    return Chart("ttft_by_turn", title, fig, note)


def _cdf(values: Floats, *, owned: bool = False) -> tuple[list[float], list[float]]:
    """``CDF_POINTS`` exact quantiles; ``owned``: ``values`` is a temporary the selection may
    reorder in place (no copy: a million records' pooled gaps are 120 MB)."""
    if values.size == 0:
        return [], []
    q = np.linspace(0.0, 1.0, min(CDF_POINTS, values.size))
    xs = np.quantile(values, q, overwrite_input=owned)
    return [float(v) for v in xs], [float(v) for v in q]


def cdf(runs: Sequence[LabelledRun], key: str, field: str, title: str) -> Chart:
    """One curve per run over every measured step; one run: one curve per step as well."""
    fig = go.Figure()
    # Each curve's quantiles taken as it comes: no pooled array outlives its curve.
    curves: list[tuple[str, tuple[list[float], list[float]], str, str]] = []
    for i, run in enumerate(runs):
        pooled = _cdf(run.digest.pooled(field), owned=True)
        curves.append((run.label if len(runs) > 1 else "all steps", pooled,
                       _run_colour(runs, i), "solid"))  # fmt: skip
        if len(runs) == 1 and len(run.digest.steps) > 1:
            for j, (step, d) in enumerate(zip(run.summary.steps, run.digest.steps, strict=True)):
                value, unit = offered_load(step)
                curve = _cdf(getattr(d, field))
                curves.append((f"@ {value:g} {unit}", curve, _colour(j + 1), "dot"))
    for name, (xs, ys), colour, dash in curves:
        if xs:
            fig.add_trace(go.Scatter(x=xs, y=ys, name=name, mode="lines",
                                     line={"color": colour, "dash": dash}))  # fmt: skip
    return Chart(key, title, _layout(fig, f"{title}: CDF", "ms (log)", "fraction ≤ x",
                                     xaxis_type="log"))  # fmt: skip


def phases(runs: Sequence[LabelledRun]) -> Chart:
    """Stacked bars per run and group: the client's view, and the server's joined under it."""
    rows: list[tuple[str, dict[str, float], float]] = []
    for run in runs:
        for b in breakdowns(run.digest.pooled("phases")):
            prefix = f"{run.label} · " if len(runs) > 1 else ""
            name = f"{prefix}{b.label} (n={b.count})"
            rows.append((f"{name} · client", b.client, b.ttlt_ms))
            if b.server is not None:
                rows.append((f"{name} · server", b.server, b.ttlt_ms))
    labels = {**{f"c:{k}": v for k, v in CLIENT_LABELS.items()},
              **{f"s:{k}": v for k, v in SERVER_LABELS.items()}}  # fmt: skip
    fig = go.Figure()
    cats = [r[0] for r in rows]
    for n, (segment, label) in enumerate(labels.items()):
        view, key = segment.split(":")
        xs = [
            (values.get(key) if cat.endswith("client") == (view == "c") else None)
            for cat, values, _ in rows
        ]
        if not any(x for x in xs):
            continue  # a segment no request spent time in (TLS on plain HTTP) is left out
        colour = SEGMENT_COLOURS.get(segment, _colour(n))
        fig.add_trace(go.Bar(y=cats, x=xs, name=label, orientation="h",
                             marker={"color": colour}))  # fmt: skip
    if rows:
        fig.add_trace(go.Scatter(y=cats, x=[t for _, _, t in rows], name="mean TTLT",
                                 mode="markers", marker={"symbol": "line-ns-open", "size": 18,
                                                         "color": "black"}))  # fmt: skip
    title = "Where the time goes: median and slowest 1 % (client phases, server joined)"
    fig = _layout(fig, title, "ms (group mean)", "", barmode="stack",
                  height=max(320, 70 * len(rows) + 160))  # fmt: skip
    fig.update_yaxes(autorange="reversed")
    return Chart("phases", title, fig,
                 "server phases are placed inside the client's wait + stream window "
                 "(docs/report.md: the join rule)")  # fmt: skip


def reasoning(runs: Sequence[LabelledRun]) -> Chart:
    """Time to first output (``ttft_ms``) against time to first answer token, p50 and p99."""
    several, colour = _per_step(runs)
    fig = go.Figure()
    for i, run in enumerate(runs):
        steps = run.summary.steps
        for j, (field, what) in enumerate((("ttft_ms", "first output"),
                                           ("answer_ttft_ms", "first answer"))):  # fmt: skip
            for attr, dash in (("p50", "solid"), ("p99", "dot")):
                ys = [getattr(getattr(s, field), attr) for s in steps]
                _line(fig, run, ys, _name(run, f"{what} {attr}", several), colour(i, j), dash)
    return Chart("reasoning", "Reasoning: first output vs first answer token",
                 _layout(fig, "Time to first output vs first answer token", _x_title(runs), "ms"),
                 "the gap is the reasoning phase (docs/workloads.md)")  # fmt: skip


def prefix_cache(runs: Sequence[LabelledRun]) -> Chart:
    """The server's prefix-cache hits per step, as it reports them in ``usage``."""
    several, colour = _per_step(runs)
    fig = go.Figure()
    for i, run in enumerate(runs):
        steps = run.summary.steps
        _line(fig, run, [s.prefix_hit_ratio for s in steps],
              _name(run, "requests with a hit", several), colour(i, 0))  # fmt: skip
        _line(fig, run, [s.cached_tokens_ratio for s in steps],
              _name(run, "cached ÷ prompt tokens", several), colour(i, 1), "dash")  # fmt: skip
    return Chart("prefix_cache", "Prefix-cache hits",
                 _layout(fig, "Prefix-cache hits (usage.prompt_tokens_details)", _x_title(runs),
                         "share"),
                 "from the cached_tokens the server reports")  # fmt: skip


def _workload_charts(runs: Sequence[LabelledRun]) -> list[Chart]:
    # Drawn only for runs that had them: a reasoning phase, a server reporting its cache.
    charts = []
    if any(r.summary.reasoning_tokens.count for r in runs):
        charts.append(reasoning(runs))
        charts.append(latency(runs, "reasoning_itl", "reasoning_itl_ms", "Reasoning ITL"))
        charts.append(latency(runs, "answer_itl", "answer_itl_ms", "Answer ITL"))
    if any(r.summary.prefix_hit_ratio is not None for r in runs):
        charts.append(prefix_cache(runs))
    return charts


GENERATOR_BOUND_COLOUR = "#ff7f0e"


def _mark_generator_bound(charts: list[Chart], runs: Sequence[LabelledRun]) -> list[Chart]:
    """A dotted vertical line, labelled, at every generator-bound step's offered load, on every
    per-step chart: the values there measured the generator, not the target."""
    marks = sorted({offered_load(s)[0] for r in runs for s in r.summary.steps if s.generator_bound})
    if not marks:
        return charts
    x_title = _x_title(runs)
    for chart in charts:
        if chart.figure.layout.xaxis.title.text != x_title:
            continue  # not per step: a CDF, the phases
        for x in marks:
            chart.figure.add_vline(
                x=x,
                line={"color": GENERATOR_BOUND_COLOUR, "dash": "dot", "width": 2},
                annotation_text="generator-bound",
                annotation_font_color=GENERATOR_BOUND_COLOUR,
            )
    return charts


def run_charts(runs: Sequence[LabelledRun]) -> list[Chart]:
    """Every chart of the report, for one run or several overlaid, in reading order; ``TTFT by
    turn`` only when a run has multi-turn sessions; steps where the generator was the bottleneck
    are marked on the per-step charts."""
    return _mark_generator_bound(_charts(runs), runs)


def _charts(runs: Sequence[LabelledRun]) -> list[Chart]:
    turns = [ttft_by_turn(runs)] if any(r.summary.sessions for r in runs) else []
    return [
        throughput(runs),
        *(latency(runs, key, field, title) for key, field, title in LATENCIES),
        *turns,
        stream_rate(runs),
        errors(runs),
        retries(runs),
        lateness(runs),
        omission(runs),
        dropped(runs),
        cdf(runs, "ttft_cdf", "ttft_ms", "TTFT"),
        cdf(runs, "itl_cdf", "itl_ms", "ITL"),
        phases(runs),
        *_workload_charts(runs),
    ]


def charts_html(charts: Sequence[Chart]) -> str:
    """The charts as ``<figure>``s with their ``Plotly.newPlot`` calls; needs ``plotly_script``
    once in the page. Deterministic: the same runs give the same text."""
    parts = []
    for chart in charts:
        div = chart.figure.to_html(
            full_html=False,
            include_plotlyjs=False,
            div_id=f"chart-{chart.key}",
            config=_CONFIG,
            default_height=f"{chart.figure.layout.height or 380}px",
        )
        note = f"<figcaption>{html.escape(chart.note)}</figcaption>" if chart.note else ""
        parts.append(f'<figure class="chart" data-chart="{chart.key}">{div}{note}</figure>')
    return "\n".join(parts)


def plotly_script() -> str:
    """``<script>`` with plotly.js inlined: put it once in a page's head (it opens offline)."""
    return f'<script type="text/javascript">{plotly.offline.get_plotlyjs()}</script>'
