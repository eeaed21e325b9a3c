"""The retries study's charts: goodput and amplification per policy, measured beside the model."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

if TYPE_CHECKING:
    from ramplab.study.retries.cells import Cell

__all__ = ["charts"]


def _per_scenario(cells: list[Cell], measured: str, model: str, title: str, unit: str) -> go.Figure:
    scenarios = list(dict.fromkeys(c.scenario for c in cells))
    fig = make_subplots(rows=1, cols=len(scenarios), subplot_titles=scenarios, shared_yaxes=True)
    for col, scenario in enumerate(scenarios, start=1):
        mine = [c for c in cells if c.scenario == scenario]
        policies = [c.policy for c in mine]
        fig.add_trace(
            go.Bar(
                x=policies,
                y=[c.measured.get(measured) for c in mine],
                name="measured",
                marker_color="#1f77b4",
                showlegend=col == 1,
            ),
            row=1,
            col=col,
        )
        errors = [c.model.get(f"{model}_error") for c in mine]
        fig.add_trace(
            go.Scatter(
                x=policies,
                y=[c.model.get(model) for c in mine],
                error_y={"array": errors, "visible": any(e is not None for e in errors)},
                mode="markers",
                marker={"symbol": "diamond", "size": 10, "color": "#d62728"},
                name="model",
                showlegend=col == 1,
            ),
            row=1,
            col=col,
        )
    fig.update_layout(title=title, yaxis_title=unit, barmode="group")
    return fig


def _recovery(cells: list[Cell]) -> go.Figure | None:
    mine = [c for c in cells if c.scenario == "outage"]
    if not mine:
        return None
    policies = [c.policy for c in mine]
    fig = go.Figure()
    fig.add_bar(x=policies, y=[c.measured.get("recovery_s") for c in mine], name="measured")
    fig.add_scatter(
        x=policies,
        y=[c.model.get("recovery_s") for c in mine],
        mode="markers",
        marker={"symbol": "diamond", "size": 10},
        name="model",
    )
    fig.update_layout(
        title="Time to recover after the outage (no bar: did not recover within the run)",
        yaxis_title="seconds after the window's end",
    )
    return fig


def charts(cells: list[Cell]) -> list[dict[str, Any]]:
    figures = [
        _per_scenario(
            cells, "goodput_qps", "goodput_qps", "Goodput per policy", "requests/s within SLO"
        ),
        _per_scenario(
            cells,
            "retry_amplification",
            "amplification",
            "Retry amplification",
            "attempts ÷ requests",
        ),
        _per_scenario(cells, "success_ratio", "success", "Success ratio", "succeeded ÷ requests"),
        _recovery(cells),
    ]
    return [f.to_plotly_json() for f in figures if f is not None]
