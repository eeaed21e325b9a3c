"""Grafana dashboards as code: ``python -m ramplab.metrics.dashboards`` writes them out.

    model.py     a typed model of panels, queries and variables, rendered to Grafana's JSON
    variables.py the run / scenario / instance variables every dashboard has
    catalog.py   the shipped dashboards, in order
    engine.py    the inference engine's: its own /metrics beside the clients' figures

The JSON files in ``grafana/dashboards/`` are generated; a test keeps them equal to this code.
"""

from ramplab.metrics.dashboards.catalog import all_dashboards
from ramplab.metrics.dashboards.model import (
    DATASOURCE_UID,
    Dashboard,
    Panel,
    Query,
    Variable,
    render,
)

__all__ = ["DATASOURCE_UID", "Dashboard", "Panel", "Query", "Variable", "all_dashboards", "render"]
