"""The live latency in Locust's web UI: a tab of its own, beside Locust's tables.

Locust's UI shows its own request table (where ramplab's TTFT and TTLT have rows of their own)
and lets a plugin add tabs: ``extended_tabs``/``extended_tables`` in the page's template
arguments name a tab and its columns, and the UI reads the tab's rows from the
``extended_stats`` of each ``/stats/requests`` answer. The rows are the master's merged
sketches (``metrics/live.py``): per step, TTFT, TPOT, TTLT and ITL at p50/p90/p99 within 1 %.
"""

from __future__ import annotations

import json
from typing import Any

from ramplab.metrics.live import LiveFigures

__all__ = ["TAB", "install_live_tab", "rows"]

TAB = "ramplab-live"
COLUMNS = (("step", "step"), ("figure", "figure"), ("p50", "p50 ms"), ("p90", "p90 ms"),
           ("p99", "p99 ms"), ("count", "values"))  # fmt: skip


def rows(live: LiveFigures) -> list[dict[str, Any]]:
    """One row per step and figure, values rounded for the table (within 1 % anyway)."""
    out = []
    for step, figures in live.snapshot().items():
        for figure, shown in figures.items():
            row: dict[str, Any] = {"step": step, "figure": figure, "count": shown["count"]}
            for key in ("p50", "p90", "p99"):
                value = shown.get(key)
                row[key] = None if value is None else round(float(value), 2)
            out.append(row)
    return out


def install_live_tab(web_ui: Any, live: LiveFigures) -> None:
    """Add the tab to a Locust ``WebUI`` (its Flask app and template arguments)."""
    from flask import Response, request  # Locust's own web framework; loaded with the UI

    web_ui.template_args["extended_tabs"] = [{"title": "Live latency", "key": TAB}]
    web_ui.template_args["extended_tables"] = [
        {"key": TAB, "structure": [{"key": key, "title": title} for key, title in COLUMNS]}
    ]

    @web_ui.app.after_request  # type: ignore[untyped-decorator]
    def add_live_rows(response: Response) -> Response:
        if request.path != "/stats/requests" or not response.is_json:
            return response
        data = response.get_json()
        data["extended_stats"] = [{"key": TAB, "data": rows(live)}]
        response.set_data(json.dumps(data))
        return response
