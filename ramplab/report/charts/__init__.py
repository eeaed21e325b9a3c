"""The report's charts (plotly), for one run or several overlaid: the public charting API.

Every chart takes a list of labelled runs, so the same call draws one run's report and an
experiment's comparison::

    from ramplab.report.charts import LabelledRun, run_charts, charts_html, plotly_script

    runs = [LabelledRun.load(Path("results/a"), "locked"), LabelledRun.load(Path("results/b"))]
    charts = run_charts(runs)            # list[Chart]: key, title, plotly Figure (or a sentence)
    body = charts_html(charts)           # the <div>s and their newPlot calls, no plotly.js
    page = f"<html><head>{plotly_script()}</head><body>{body}</body></html>"  # inlined once

Per-step charts put the offered load on the x-axis (``offered.offered_load``: the step's target
QPS; users for a closed loop), never the step number, so runs with different ramps line up; the
axis is logarithmic for a geometric ramp (``base.log_axis``). Data comes from each run's
``RunSummary`` (percentiles, rates, counts) and its ``RunDigest`` (distributions, phases,
retries, tokens, requests in flight, the per-second timeline: ``results/digest.py``, one pass
over the records, a batch at a time). One run: colours tell series apart; several: colours tell
runs (variants) apart, the dash tells the series, a variant's repeats are one band. Nothing is
drawn that was not measured: a missing value is a gap; a chart with nothing to show is a sentence.

The family: ``base`` (runs, layout, axis, series), ``load`` (throughput, throughput vs latency,
in flight, tokens), ``latency`` (percentiles, the omission gap, CDFs), ``generator`` (errors,
retries, lateness, drops), ``timeseries`` (the run second by second), ``phases``.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np
import plotly.offline

from ramplab.report.charts.base import PALETTE, Chart, LabelledRun
from ramplab.report.charts.generator import (
    dropped,
    errors,
    lateness,
    quiet,
    quiet_sentence,
    retries,
)
from ramplab.report.charts.latency import cdf, latency, omission, reasoning, ttft_by_turn
from ramplab.report.charts.load import (
    GOODPUT,
    concurrency,
    pareto,
    prefix_cache,
    stream_rate,
    throughput,
    tokens,
)
from ramplab.report.charts.phases import SEGMENT_COLOURS, phases
from ramplab.report.charts.timeseries import timeline
from ramplab.results.offered import offered_load

__all__ = [
    "GOODPUT",
    "PALETTE",
    "SEGMENT_COLOURS",
    "Chart",
    "LabelledRun",
    "charts_html",
    "plotly_script",
    "run_charts",
]

LATENCIES = (
    ("ttft", "ttft_ms", "TTFT (from the intended start)"),
    ("itl", "itl_ms", "ITL (per token)"),
    ("tpot", "tpot_ms", "TPOT"),
    ("ttlt", "ttlt_ms", "TTLT (from the intended start)"),
)
CDFS = (("ttft_cdf", "ttft_ms", "TTFT"), ("itl_cdf", "itl_ms", "ITL"),
        ("tpot_cdf", "tpot_ms", "TPOT"), ("ttlt_cdf", "ttlt_ms", "TTLT"))  # fmt: skip
GENERATOR_BOUND_COLOUR = "#ff7f0e"
_CONFIG = {"displaylogo": False, "responsive": True}


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


def _mark_generator_bound(charts: list[Chart], runs: Sequence[LabelledRun]) -> list[Chart]:
    """A dotted vertical line, labelled, at every generator-bound step's offered load, on every
    per-step chart: the values there measured the generator, not the target."""
    marks = sorted({offered_load(s)[0] for r in runs for s in r.summary.steps if s.generator_bound})
    for chart in charts:
        if not marks or chart.figure is None or not chart.per_step:
            continue
        log = chart.figure.layout.xaxis.type == "log"
        for x in marks:
            chart.figure.add_vline(
                x=x, line={"color": GENERATOR_BOUND_COLOUR, "dash": "dot", "width": 2}
            )
            # An annotation on a log axis is placed at its log10 (a shape at the value).
            chart.figure.add_annotation(
                x=float(np.log10(x)) if log else x, y=1.0, yref="paper", showarrow=False,
                text="generator-bound", font={"color": GENERATOR_BOUND_COLOUR},
                xanchor="left", yanchor="bottom",
            )  # fmt: skip
    return charts


def _collapse(charts: list[Chart], runs: Sequence[LabelledRun]) -> list[Chart]:
    """The charts with nothing to show replaced by one sentence, where the first of them stood."""
    empty = quiet(runs)
    if not empty:
        return charts
    at = min(i for i, c in enumerate(charts) if c.key in empty)
    kept = [c for c in charts if c.key not in empty]
    sentence = Chart("quiet", "nothing to chart", None, quiet_sentence(empty))
    return [*kept[:at], sentence, *kept[at:]]


def run_charts(runs: Sequence[LabelledRun]) -> list[Chart]:
    """Every chart of the report, for one run or several overlaid, in reading order; ``TTFT by
    turn`` only when a run has multi-turn sessions; errors, retries and drops collapsed into one
    sentence (a ``Chart`` keyed ``quiet`` without a figure) when none occurred; steps where the
    generator was the bottleneck marked on the per-step charts."""
    turns = [ttft_by_turn(runs)] if any(r.summary.sessions for r in runs) else []
    charts = [
        throughput(runs),
        pareto(runs),
        *(latency(runs, key, field, title) for key, field, title in LATENCIES),
        *turns,
        concurrency(runs),
        tokens(runs),
        stream_rate(runs),
        errors(runs),
        retries(runs),
        lateness(runs),
        omission(runs),
        dropped(runs),
        timeline(runs),
        *(cdf(runs, key, field, title) for key, field, title in CDFS),
        phases(runs),
        *_workload_charts(runs),
    ]
    return _mark_generator_bound(_collapse(charts, runs), runs)


def charts_html(charts: Sequence[Chart]) -> str:
    """The charts as ``<figure>``s with their ``Plotly.newPlot`` calls (a collapsed one as its
    sentence); needs ``plotly_script`` once in the page. Deterministic: the same runs give the
    same text."""
    parts = []
    for chart in charts:
        if chart.figure is None:
            parts.append(f'<p class="chart-collapsed" data-chart="{chart.key}">'
                         f"{html.escape(chart.note)}</p>")  # fmt: skip
            continue
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
