"""A small typed model of Grafana dashboards, rendered to the JSON Grafana provisions.

Only what the shipped dashboards use: time series, stats and bar gauges, Prometheus queries,
query variables. Panels are laid out left to right in rows of :data:`GRID_WIDTH` units, so a
dashboard is a list of panels and never a hand-kept grid.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

#: The provisioned Prometheus datasource (``grafana/provisioning/datasources``) — fixed, so
#: every dashboard can name it.
DATASOURCE_UID = "ramplab-prometheus"
DATASOURCE = {"type": "prometheus", "uid": DATASOURCE_UID}
GRID_WIDTH = 24
SCHEMA_VERSION = 39

PanelKind = Literal["timeseries", "stat", "bargauge"]


@dataclass(frozen=True, slots=True)
class Query:
    """One PromQL expression and its legend (``{{label}}`` placeholders allowed)."""

    expr: str
    legend: str = ""


@dataclass(frozen=True, slots=True)
class Panel:
    """One panel. ``instant`` panels (stat, bar gauge) evaluate their queries once per refresh."""

    title: str
    description: str
    queries: tuple[Query, ...]
    unit: str = "short"
    kind: PanelKind = "timeseries"
    stack: bool = False
    width: int = 12
    height: int = 8

    @property
    def instant(self) -> bool:
        return self.kind != "timeseries"


@dataclass(frozen=True, slots=True)
class Variable:
    """A query variable: the values of ``label`` on ``metric`` (a selector may use others)."""

    name: str
    label: str
    metric: str
    include_all: bool = False

    @property
    def definition(self) -> str:
        return f"label_values({self.metric}, {self.label})"


@dataclass(frozen=True, slots=True)
class Dashboard:
    uid: str
    title: str
    description: str
    panels: tuple[Panel, ...]
    variables: tuple[Variable, ...] = field(default_factory=tuple)
    tags: tuple[str, ...] = ("ramplab",)


def _panel_json(panel: Panel, panel_id: int, x: int, y: int) -> dict[str, Any]:
    targets = [
        {
            "refId": chr(ord("A") + index),
            "datasource": DATASOURCE,
            "expr": query.expr,
            "legendFormat": query.legend or "__auto",
            "instant": panel.instant,
            "range": not panel.instant,
        }
        for index, query in enumerate(panel.queries)
    ]
    defaults: dict[str, Any] = {"unit": panel.unit}
    options: dict[str, Any] = {}
    if panel.kind == "timeseries":
        defaults["custom"] = {
            "drawStyle": "line",
            "lineWidth": 1,
            "fillOpacity": 30 if panel.stack else 0,
            "stacking": {"mode": "normal" if panel.stack else "none", "group": "A"},
            "showPoints": "never",
        }
        options = {
            "legend": {"displayMode": "table", "placement": "bottom", "calcs": ["lastNotNull"]},
            "tooltip": {"mode": "multi", "sort": "desc"},
        }
    elif panel.kind == "stat":
        options = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}}
    else:
        options = {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "orientation": "horizontal",
            "displayMode": "gradient",
        }
    return {
        "id": panel_id,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": DATASOURCE,
        "gridPos": {"h": panel.height, "w": panel.width, "x": x, "y": y},
        "targets": targets,
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": options,
    }


def _variable_json(variable: Variable) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": variable.name,
        "label": variable.name,
        "type": "query",
        "datasource": DATASOURCE,
        "definition": variable.definition,
        "query": {"query": variable.definition, "refId": f"var-{variable.name}"},
        "refresh": 2,  # on time-range change: a new run shows up without a reload
        "sort": 1,
        "multi": variable.include_all,
        "includeAll": variable.include_all,
        "current": {},
        "options": [],
    }
    if variable.include_all:
        out["allValue"] = ".*"
    return out


def render(dashboard: Dashboard) -> dict[str, Any]:
    """The dashboard as Grafana's JSON model (deterministic: same input, same output)."""
    panels: list[dict[str, Any]] = []
    x = y = row_height = 0
    for panel_id, panel in enumerate(dashboard.panels, start=1):
        if x + panel.width > GRID_WIDTH:
            x, y, row_height = 0, y + row_height, 0
        panels.append(_panel_json(panel, panel_id, x, y))
        x += panel.width
        row_height = max(row_height, panel.height)
    return {
        "uid": dashboard.uid,
        "title": dashboard.title,
        "description": dashboard.description,
        "tags": list(dashboard.tags),
        "editable": False,
        "graphTooltip": 1,
        "timezone": "browser",
        "refresh": "5s",
        "time": {"from": "now-30m", "to": "now"},
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "links": [
            {
                "type": "dashboards",
                "tags": ["ramplab"],
                "asDropdown": True,
                "title": "ramplab",
                "includeVars": True,
                "keepTime": True,
            }
        ],
        "annotations": {"list": []},
        "templating": {"list": [_variable_json(v) for v in dashboard.variables]},
        "panels": panels,
    }
