"""``report.html``: the per-step table and two charts in one file with no external resource.

The charts are inline SVG drawn here (target vs achieved QPS, TTFT p50/p99 per step) so the file
opens anywhere, offline, and can be attached to a CI run as it is.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["write_html"]

_W, _H, _PAD = 560, 220, 40
_STYLE = """
body{font:14px system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;
text-align:right}th{background:#f4f4f4}svg{margin:0 2em 1em 0}.legend{font-size:12px}
"""


def _series_svg(
    title: str, steps: Sequence[Mapping[str, Any]], series: Sequence[tuple[str, str, str]]
) -> str:
    """A line chart over the steps; ``series`` holds (label, path, colour); gaps are skipped."""
    values: list[list[float | None]] = []
    for _, path, _ in series:
        column: list[float | None] = []
        for step in steps:
            value: Any = step
            for part in path.split("."):
                value = value.get(part) if isinstance(value, Mapping) else None
            column.append(float(value) if isinstance(value, int | float) else None)
        values.append(column)
    top = max([v for column in values for v in column if v is not None] or [1.0]) * 1.1 or 1.0
    n = max(len(steps) - 1, 1)

    def x(i: int) -> float:
        return _PAD + i * (_W - 2 * _PAD) / n

    def y(v: float) -> float:
        return _H - _PAD + 10 - v * (_H - _PAD - 10) / top

    parts = [
        f'<svg width="{_W}" height="{_H}" viewBox="0 0 {_W} {_H}" role="img">',
        f'<text x="{_PAD}" y="14">{html.escape(title)}</text>',
        f'<line x1="{_PAD}" y1="{y(0):.1f}" x2="{_W - _PAD}" y2="{y(0):.1f}" stroke="#999"/>',
        f'<text x="4" y="{y(top / 1.1) + 4:.1f}" class="legend">{top / 1.1:.3g}</text>',
    ]
    for i, step in enumerate(steps):
        parts.append(
            f'<text x="{x(i) - 4:.1f}" y="{_H - 12}" class="legend">{step.get("index", i)}</text>'
        )
    for (_, _, colour), column in zip(series, values, strict=True):
        points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(column) if v is not None)
        parts.append(
            f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2"/>'
        )
        for i, v in enumerate(column):
            if v is not None:
                parts.append(f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="3" fill="{colour}"/>')
    for k, (label, _, colour) in enumerate(series):
        parts.append(
            f'<text x="{_W - _PAD - 150}" y="{30 + 14 * k}" fill="{colour}" class="legend">'
            f"{html.escape(label)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def write_html(
    path: Path,
    title: str,
    facts: Sequence[tuple[str, str]],
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    steps: Sequence[Mapping[str, Any]],
) -> Path:
    """Write the report; every text is escaped."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows
    )
    listed = "".join(f"<li>{html.escape(k)}: <code>{html.escape(v)}</code></li>" for k, v in facts)
    charts = _series_svg(
        "QPS per step", steps,
        [("target", "target_qps", "#888"), ("achieved", "achieved_qps", "#1f77b4"),
         ("goodput", "goodput_qps", "#2ca02c")],
    ) + _series_svg(
        "TTFT ms per step", steps,
        [("p50", "ttft_ms.p50", "#1f77b4"), ("p99", "ttft_ms.p99", "#d62728")],
    )  # fmt: skip
    document = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1><ul>{listed}</ul>"
        f"<div>{charts}</div><table><tr>{head}</tr>{body}</table>"
        "<p>Definitions: docs/metrics.md. Steps exclude their warm-up.</p></body></html>\n"
    )
    path.write_text(document, encoding="utf-8")
    return path
