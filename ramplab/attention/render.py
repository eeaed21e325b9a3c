"""The attention backtrace as tables (rich), a JSON document and a plotly chart (offline HTML).

The chart follows the report's conventions (``ramplab.report.charts``): a ``Chart`` with a
stable key, the report's palette, plotly.js inlined once in the page so that it opens offline.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from rich.console import Console
from rich.table import Table

from ramplab.attention.relevance import Relevance
from ramplab.report.charts import PALETTE, Chart, charts_html, plotly_script

__all__ = ["Backtrace", "chart", "print_backtrace", "to_json", "write_chart"]


@dataclass(frozen=True)
class Backtrace:
    """Everything one ``ramplab attention`` run measured, and on what."""

    model: str
    directory: Path
    window: int | None
    layers: int
    heads: int
    context_tokens: int
    needle: str
    question: str
    results: list[Relevance]

    @property
    def causal(self) -> bool:
        return any(r.causal for r in self.results)


def _depth(depth: float) -> str:
    return f"{depth:g} %"


def _near(r: Relevance, radius: int) -> float:
    lo, hi = max(0, r.answer - radius), min(r.positions, r.answer + radius + 1)
    return float(r.values[lo:hi].mean())


def print_backtrace(console: Console, bt: Backtrace) -> None:
    """A summary row per depth, then mean relevance per distance bin (a column per depth)."""
    kind = "causal (queries before the answer cannot see it)" if bt.causal else "bidirectional"
    summary = Table(
        title=f"Attention backtrace — {bt.model}, last layer of {bt.layers}, mean of {bt.heads} "
        f"heads, {bt.context_tokens} tokens, {kind}",
        caption="relevance = attention a query position pays to the answer token; "
        f"uniform = 1/{bt.context_tokens} = {1 / bt.context_tokens:.5f}",
    )
    for name in ("depth", "answer at", "answer token", "peak at distance", "relevance at 0",
                 "mean |d| ≤ 8", "mean |d| > 64", "mean, all"):  # fmt: skip
        summary.add_column(name, justify="left" if name == "answer token" else "right")
    for r in bt.results:
        far = [b.mean * b.positions for b in r.bins() if b.mean is not None and abs(b.low) > 64]
        far_n = sum(b.positions for b in r.bins() if abs(b.low) > 64)
        summary.add_row(
            _depth(r.depth),
            str(r.answer),
            r.answer_token,
            f"{r.peak_distance():+d}",
            f"{r.values[r.answer]:.4f}",
            f"{_near(r, 8):.4f}",
            f"{sum(far) / far_n:.4f}" if far_n else "—",
            f"{r.values.mean():.4f}",
        )
    console.print(summary)
    bins = Table(title="Mean relevance by signed distance from the answer token (query − answer)")
    bins.add_column("distance")
    for r in bt.results:
        bins.add_column(_depth(r.depth), justify="right")
    per_depth = [r.bins() for r in bt.results]
    for row in range(len(per_depth[0])):
        cells = [b[row] for b in per_depth]
        if all(c.mean is None for c in cells):
            continue
        bins.add_row(cells[0].label, *["—" if c.mean is None else f"{c.mean:.4f}" for c in cells])
    console.print(bins)


def to_json(bt: Backtrace) -> dict[str, Any]:
    """The ``--json`` document (docs/attention.md describes it)."""
    return {
        "model": bt.model,
        "directory": str(bt.directory),
        "window": bt.window,
        "layers": bt.layers,
        "heads": bt.heads,
        "causal": bt.causal,
        "context_tokens": bt.context_tokens,
        "needle": bt.needle,
        "question": bt.question,
        "uniform": 1 / bt.context_tokens,
        "depths": [
            {
                "depth": r.depth,
                "answer_index": r.answer,
                "answer_token": r.answer_token,
                "peak_distance": r.peak_distance(),
                "relevance": [round(float(v), 6) for v in r.values],
                "distance": r.distances(),
                "bins": [
                    {
                        "label": b.label,
                        "low": b.low,
                        "high": b.high,
                        "positions": b.positions,
                        "mean": None if b.mean is None else round(b.mean, 6),
                    }
                    for b in r.bins()
                ],
            }
            for r in bt.results
        ],
    }


def chart(bt: Backtrace) -> Chart:
    """Relevance against signed distance, a line per depth, log y (the peak is ~10× the rest)."""
    fig = go.Figure()
    for i, r in enumerate(bt.results):
        fig.add_trace(
            go.Scatter(
                x=r.distances(),
                y=[float(v) for v in r.values],
                mode="lines",
                name=f"needle at {_depth(r.depth)}",
                line={"color": PALETTE[i % len(PALETTE)], "width": 1.5},
            )
        )
    fig.add_hline(
        y=1 / bt.context_tokens,
        line={"dash": "dot", "color": "#7f7f7f"},
        annotation_text="uniform",
    )
    fig.update_layout(
        title={"text": f"Attention paid to the answer token — {bt.model}", "x": 0.01},
        xaxis_title="signed distance from the answer token (query position − answer position)",
        yaxis_title="relevance (last layer, mean over heads)",
        yaxis_type="log",
        template="plotly_white",
        height=420,
        margin={"l": 60, "r": 20, "t": 50, "b": 50},
        legend={"orientation": "h", "y": -0.2},
        hovermode="closest",
    )
    return Chart(
        key="attention",
        title="Attention backtrace",
        figure=fig,
        note=f"{bt.context_tokens} tokens; needle: {bt.needle!r}; answer token: "
        f"{bt.results[0].answer_token!r}"
        if bt.results
        else "",
    )


def write_chart(bt: Backtrace, path: Path) -> None:
    """A self-contained HTML page (plotly.js inlined): it opens without a network."""
    title = html.escape(f"ramplab attention — {bt.model}")
    path.write_text(
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>"
        f"<style>body{{font-family:system-ui,sans-serif;margin:1.5em}}"
        f"figcaption{{color:#555;font-size:.9em}}</style>"
        f"{plotly_script()}</head><body>{charts_html([chart(bt)])}</body></html>",
        encoding="utf-8",
    )
