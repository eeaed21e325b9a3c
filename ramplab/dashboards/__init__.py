"""Grafana dashboards as code: ``python -m ramplab.dashboards`` writes ``grafana/dashboards/``.

    model.py     a typed model of panels, queries and variables, rendered to Grafana's JSON
    catalog.py   the six shipped dashboards

The JSON files in ``grafana/dashboards/`` are generated; a test keeps them equal to this code.
"""

from ramplab.dashboards.catalog import all_dashboards
from ramplab.dashboards.model import DATASOURCE_UID, Dashboard, Panel, Query, Variable, render

__all__ = ["DATASOURCE_UID", "Dashboard", "Panel", "Query", "Variable", "all_dashboards", "render"]
