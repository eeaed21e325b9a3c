"""The chunking study's charts: latency against chunk size with the model, residuals, objective.

Chunk sizes go on a log₂ axis (the sweep doubles them); one colour per sleep setting; measured
points are markers, the fitted model lines. Every figure is returned as plotly JSON.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from ramplab.study.chunking.model import StreamRows, TwoPhaseFit
from ramplab.study.chunking.optimum import Optimum

__all__ = ["latency_chart", "objective_chart", "residual_chart"]

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd")
Cell = tuple[int, float, list[float], list[float]]  # chunk, sleep, TTFTs, TTLTs of one run


def _layout(fig: go.Figure, title: str, y: str, chunks: Sequence[int]) -> dict[str, Any]:
    fig.update_layout(
        title={"text": title, "x": 0.01},
        xaxis={"title": "chunk size (tokens per event, log₂)", "type": "log",
               "tickvals": sorted(set(chunks)), "ticktext": [str(c) for c in sorted(set(chunks))]},
        yaxis_title=y,
        template="plotly_white",
        height=420,
        margin={"l": 60, "r": 20, "t": 50, "b": 50},
        legend={"orientation": "h", "y": -0.2},
        hovermode="closest",
    )  # fmt: skip
    data: dict[str, Any] = fig.to_plotly_json()
    return data


def _colour(sleeps: Sequence[float], sleep: float) -> str:
    return COLOURS[sorted(sleeps).index(sleep) % len(COLOURS)]


def latency_chart(cells: Sequence[Cell], fit: TwoPhaseFit | None, tokens: int) -> dict[str, Any]:
    """Measured TTFT and TTLT p50/p99 per run, and the model's mean over every chunk size."""
    fig = go.Figure()
    sleeps = sorted({c[1] for c in cells})
    for sleep in sleeps:
        colour = _colour(sleeps, sleep)
        mine = sorted((c for c in cells if c[1] == sleep), key=lambda c: c[0])
        x = [c[0] for c in mine]
        for what, index, symbol in (("TTFT", 2, "circle"), ("TTLT", 3, "square")):
            for q, fill in ((50, ""), (99, "-open")):
                y = [float(np.percentile(c[index], q)) if c[index] else None for c in mine]
                fig.add_trace(go.Scatter(
                    x=x, y=y, mode="markers", name=f"{what} p{q}, sleep {sleep:g} ms",
                    marker={"color": colour, "symbol": symbol + fill, "size": 8},
                ))  # fmt: skip
        if fit is not None:
            grid = list(range(1, tokens + 1))
            predicted = [fit.predict(c, tokens, sleep) for c in grid]
            for what, values, dash in (
                ("TTFT", [p.ttft_ms for p in predicted], "dash"),
                ("TTLT", [p.ttlt_ms for p in predicted], "solid"),
            ):
                fig.add_trace(go.Scatter(
                    x=grid, y=values, mode="lines", name=f"model {what}, sleep {sleep:g} ms",
                    line={"color": colour, "dash": dash, "width": 1.5},
                ))  # fmt: skip
    chunks = [c[0] for c in cells] or [1]
    return _layout(fig, "TTFT and TTLT against chunk size (from the send)", "ms", chunks)


def residual_chart(rows: StreamRows, fit: TwoPhaseFit, chunks: Sequence[int]) -> dict[str, Any]:
    """Every request's residual (measured − model) per phase, at its run's chunk size."""
    fig = go.Figure()
    sleeps = sorted({float(s) for s in rows.sleep_ms})
    chunk_of = np.asarray(chunks, dtype=float)[rows.run]
    for sleep in sleeps:
        mask = rows.sleep_ms == sleep
        spread = 1.0 + 0.04 * (sleeps.index(sleep) - (len(sleeps) - 1) / 2)
        for what, key, symbol in (("TTFT", "ttft", "circle"), ("TTLT", "ttlt", "square")):
            fig.add_trace(go.Scatter(
                x=chunk_of[mask] * spread * (0.97 if key == "ttft" else 1.03),
                y=fit.residuals[key][mask], mode="markers",
                name=f"{what}, sleep {sleep:g} ms",
                marker={"color": _colour(sleeps, sleep), "symbol": symbol, "size": 4,
                        "opacity": 0.5},
            ))  # fmt: skip
    fig.add_hline(y=0, line={"color": "#7f7f7f", "width": 1})
    return _layout(fig, "Residuals of the two-phase fit, per request", "measured − model, ms",
                   list(chunks))  # fmt: skip


def objective_chart(fit: TwoPhaseFit, tokens: int, optima: Sequence[Optimum]) -> dict[str, Any]:
    """The model's TTFT + TTLT over every chunk size, and the optimum of each sleep setting."""
    fig = go.Figure()
    grid = list(range(1, tokens + 1))
    sleeps = sorted(fit.sleeps)
    for sleep in sleeps:
        colour = _colour(sleeps, sleep)
        predicted = [fit.predict(c, tokens, sleep) for c in grid]
        fig.add_trace(go.Scatter(
            x=grid, y=[p.ttft_ms + p.ttlt_ms for p in predicted], mode="lines",
            name=f"TTFT + TTLT, sleep {sleep:g} ms", line={"color": colour},
        ))  # fmt: skip
        for best in (o for o in optima if o.sleep_ms == sleep and o.objective == "sum"):
            if best.chunk is not None:
                fig.add_trace(go.Scatter(
                    x=[best.chunk], y=[best.ttft_ms + best.ttlt_ms], mode="markers",
                    name=f"optimum {best.chunk}, sleep {sleep:g} ms",
                    marker={"color": colour, "symbol": "star", "size": 14},
                ))  # fmt: skip
    ticks = [c for c in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512) if c <= tokens]
    return _layout(fig, "Objective: model TTFT + TTLT per chunk size", "ms", ticks)
