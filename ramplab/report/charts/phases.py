"""Where the time goes: the phase breakdown as stacked bars, the client's view and the server's
joined under it (the join rule: ``results/breakdown.py``, docs/report.md)."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from ramplab.report.charts.base import Chart, LabelledRun, colour, layout
from ramplab.results.breakdown import CLIENT_LABELS, SERVER_LABELS, breakdowns

__all__ = ["SEGMENT_COLOURS", "phases"]

# Client segments in blues and greys, the server's in warm colours, "before the server" pale.
SEGMENT_COLOURS = {
    "c:lateness": "#9e9ac8", "c:retries": "#6a51a3", "c:dns": "#c6dbef", "c:connect": "#6baed6",
    "c:tls": "#2171b5", "c:send": "#08306b", "c:wait": "#74c476", "c:first_token": "#31a354",
    "c:stream": "#006d2c", "s:before": "#e0e0e0", "s:auth": "#fdd0a2", "s:ratelimit": "#fdae6b",
    "s:queue": "#e6550d", "s:prefill": "#fd8d3c", "s:decode": "#fdbe85", "s:sign_queue": "#bcbddc",
    "s:lock_wait": "#a50f15", "s:sign": "#de2d26", "s:unseen": "#bdbdbd",
}  # fmt: skip


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
        hue = SEGMENT_COLOURS.get(segment, colour(n))
        fig.add_trace(go.Bar(y=cats, x=xs, name=label, orientation="h", marker={"color": hue}))
    if rows:
        fig.add_trace(go.Scatter(y=cats, x=[t for _, _, t in rows], name="mean TTLT",
                                 mode="markers", marker={"symbol": "line-ns-open", "size": 18,
                                                         "color": "black"}))  # fmt: skip
    title = "Where the time goes: median and slowest 1 % (client phases, server joined)"
    fig = layout(fig, title, "ms (group mean)", "", barmode="stack",
                  height=max(320, 70 * len(rows) + 160))  # fmt: skip
    fig.update_yaxes(autorange="reversed")
    return Chart("phases", title, fig,
                 "server phases are placed inside the client's wait + stream window "
                 "(docs/report.md: the join rule)")  # fmt: skip
