"""What each step delivered: achieved and goodput against offered, throughput against latency,
requests in flight, tokens/s in, out and total, per-stream rates and prefix-cache hits."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from ramplab.report.charts.base import (
    Chart,
    LabelledRun,
    colour,
    layout,
    log_axis,
    per_step,
    slo_lines,
    step_layout,
    xs,
)
from ramplab.results.digest import StepDigest
from ramplab.results.offered import offered_load

__all__ = ["GOODPUT", "concurrency", "pareto", "prefix_cache", "stream_rate", "throughput",
           "tokens"]  # fmt: skip

GOODPUT = "goodput: the requests that met every SLO (or succeeded, without an SLO), per second"


def throughput(runs: Sequence[LabelledRun]) -> Chart:
    fig = go.Figure()
    loads = sorted({x for r in runs for x in xs(r.summary)})
    if loads:
        # A point at every load: on a log x-axis a line between two far points is not y = x.
        fig.add_trace(go.Scatter(x=loads, y=loads, name="offered (y = x)", mode="lines",
                                 line={"color": "#999", "dash": "dot"}))  # fmt: skip
    per_step(fig, runs, "achieved", lambda r: [s.achieved_qps for s in r.summary.steps], 0)
    per_step(fig, runs, "goodput", lambda r: [s.goodput_qps for s in r.summary.steps], 2, "dash")
    title = "Achieved and goodput vs offered"
    return Chart("throughput", title, step_layout(fig, runs, title, "QPS"), GOODPUT,
                 per_step=True)  # fmt: skip


def pareto(runs: Sequence[LabelledRun]) -> Chart:
    """Throughput against latency: one point per step at its achieved output tokens/s, its TTFT
    p50/p99 on the left axis and its ITL p50 on the right, each point labelled with the step's
    offered load — the capacity curve."""
    fig = go.Figure()
    several = len(runs) > 1
    series = (("ttft_ms", "p50", "TTFT p50", "solid", "y"), ("ttft_ms", "p99", "TTFT p99", "dot",
              "y"), ("itl_ms", "p50", "ITL p50 (right axis)", "dash", "y2"))  # fmt: skip
    seen: set[str] = set()
    for i, run in enumerate(runs):
        steps = run.summary.steps
        x = [s.output_tokens_per_s for s in steps]
        labels = [f"{offered_load(s)[0]:g} {offered_load(s)[1]}" for s in steps]
        group = run.group or run.label
        # Overlaid: TTFT only, a variant's repeats one legend entry, the later ones faint.
        repeat = group in seen
        seen.add(group)
        for j, (field, attr, what, dash, axis) in enumerate(series[:2] if several else series):
            hue = (run.colour or colour(i)) if several else colour(j)
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=[getattr(getattr(s, field), attr) for s in steps],
                    name=f"{group} · {what}" if several else what,
                    mode="lines+markers+text" if j == 1 and not repeat else "lines+markers",
                    text=labels,
                    textposition="top center",
                    line={"color": hue, "dash": dash},
                    opacity=0.45 if repeat else 1.0,
                    showlegend=not repeat,
                    legendgroup=group,
                    yaxis=axis,
                )
            )
    slo_lines(fig, runs, "ttft_ms")
    title = "Throughput vs latency (one point per step, labelled with its offered load)"
    # A geometric ramp's tokens/s span as many decades as its loads: log x keeps them apart.
    log = log_axis([x for r in runs for x in xs(r.summary)])
    right = {} if several else {"yaxis2": {"title": "ITL ms", "overlaying": "y", "side": "right",
                                           "rangemode": "tozero", "showgrid": False}}  # fmt: skip
    fig = layout(fig, title, "achieved output tokens/s" + (" (log)" if log else ""), "TTFT ms",
                 xaxis_type="log" if log else "linear", yaxis_rangemode="tozero",
                 xaxis_rangemode="tozero", margin={"l": 60, "r": 60, "t": 50, "b": 50},
                 **right)  # fmt: skip
    return Chart("pareto", "Throughput vs latency", fig,
                 "a capacity curve: where TTFT turns up while tokens/s stops growing is the knee; "
                 "output tokens/s as the per-step table counts them")  # fmt: skip


def concurrency(runs: Sequence[LabelledRun]) -> Chart:
    fig = go.Figure()
    per_step(fig, runs, "mean in flight", lambda r: [d.in_flight_mean for d in r.digest.steps], 0)
    per_step(fig, runs, "peak in flight",
             lambda r: [None if d.in_flight_max is None else float(d.in_flight_max)
                        for d in r.digest.steps], 1, "dot")  # fmt: skip
    title = "Requests in flight"
    return Chart("concurrency", title, step_layout(fig, runs, title, "requests"),
                 "first send → final outcome of every request inside the step's window: mean "
                 "= Σ time in flight ÷ window (Little's law), peak = the most at one instant",
                 per_step=True)  # fmt: skip


def _input_rate(d: StepDigest, window_s: float) -> float | None:
    return d.prompt_tokens / window_s if d.prompt_tokens and window_s > 0 else None


def tokens(runs: Sequence[LabelledRun]) -> Chart:
    fig = go.Figure()

    def rates(run: LabelledRun) -> list[tuple[float | None, float]]:
        return [
            (_input_rate(d, s.measured_s), s.output_tokens_per_s)
            for s, d in zip(run.summary.steps, run.digest.steps, strict=True)
        ]

    def total(run: LabelledRun) -> list[float | None]:
        return [None if i is None else i + o for i, o in rates(run)]

    per_step(fig, runs, "total tokens/s", total, 0)
    per_step(fig, runs, "output tokens/s", lambda r: [o for _, o in rates(r)], 1, "dash")
    per_step(fig, runs, "input (prompt) tokens/s", lambda r: [i for i, _ in rates(r)], 2, "dot")
    title = "Tokens per second: input, output and total"
    return Chart("tokens", title, step_layout(fig, runs, title, "tokens/s"),
                 "per step ÷ its measured window: output = every request's output tokens (failed "
                 "streams included), input = the prompt tokens of every request sent",
                 per_step=True)  # fmt: skip


def _stream_rates(d: StepDigest) -> tuple[float | None, float | None]:
    rates = d.stream_tokens_per_s
    if rates.size == 0:
        return None, None
    p10, p50 = np.percentile(rates, [10, 50])
    return float(p50), float(p10)


def stream_rate(runs: Sequence[LabelledRun]) -> Chart:
    fig = go.Figure()
    per_step(fig, runs, "p50 stream", lambda r: [_stream_rates(d)[0] for d in r.digest.steps], 0)
    per_step(fig, runs, "p10 (slowest 10 %)",
             lambda r: [_stream_rates(d)[1] for d in r.digest.steps], 1, "dash")  # fmt: skip
    title = "Per-stream output tokens/s"
    return Chart("stream_rate", title, step_layout(fig, runs, title, "tokens/s"),
                 "output tokens ÷ TTLT from the final send, per successful stream",
                 per_step=True)  # fmt: skip


def prefix_cache(runs: Sequence[LabelledRun]) -> Chart:
    """The server's prefix-cache hits per step, as it reports them in ``usage``."""
    fig = go.Figure()
    per_step(fig, runs, "requests with a hit",
             lambda r: [s.prefix_hit_ratio for s in r.summary.steps], 0)  # fmt: skip
    per_step(fig, runs, "cached ÷ prompt tokens",
             lambda r: [s.cached_tokens_ratio for s in r.summary.steps], 1, "dash")  # fmt: skip
    title = "Prefix-cache hits (usage.prompt_tokens_details)"
    return Chart("prefix_cache", "Prefix-cache hits", step_layout(fig, runs, title, "share"),
                 "from the cached_tokens the server reports", per_step=True)  # fmt: skip
