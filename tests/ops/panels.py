"""Evaluate a dashboard's panels the way Grafana would, against a real Prometheus."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import httpx

from ramplab.metrics.dashboards import DATASOURCE_UID, Dashboard, render


def fill(expr: str, run: str, scenario: str, instance: str, range_s: int) -> str:
    """The expression with the variables set as Grafana sets them."""
    return (
        expr.replace("$run", run)
        .replace("$scenario", scenario)
        # As Grafana does: a regex-escaped value, its backslashes escaped for a PromQL string.
        .replace("$instance", re.escape(instance).replace("\\", "\\\\"))
        .replace("$__range", f"{range_s}s")
    )


def numbers(body: dict[str, Any]) -> list[float]:
    """Every value of a query's answer that is not NaN."""
    assert body["status"] == "success", body
    out: list[float] = []
    for series in body["data"]["result"]:
        values = series.get("values") or [series["value"]]
        out += [float(v) for _, v in values if not math.isnan(float(v))]
    return out


def empty_panels(
    prom_url: str,
    dashboard: Dashboard,
    *,
    run: str,
    scenario: str,
    instance: str,
    start: float,
    end: float,
    wanted: Callable[[str], bool] | None = None,
) -> tuple[int, list[str]]:
    """How many queries (the ``wanted`` ones, or all) were evaluated, and those that returned no
    number: range queries for time series, instant ones (at ``end``) for stats and bar gauges."""
    range_s = math.ceil(end - start) + 5
    empty: list[str] = []
    checked = 0
    for panel in render(dashboard)["panels"]:
        assert panel["datasource"]["uid"] == DATASOURCE_UID
        for target in panel["targets"]:
            if wanted is not None and not wanted(target["expr"]):
                continue
            expr = fill(target["expr"], run, scenario, instance, range_s)
            params: dict[str, str | float] = {"query": expr}
            if target["instant"]:
                url, params["time"] = "/api/v1/query", end
            else:
                url = "/api/v1/query_range"
                params.update(start=start, end=end, step=1)
            body = httpx.get(prom_url + url, params=params, timeout=10).json()
            checked += 1
            if not numbers(body):
                empty.append(f"{dashboard.uid} / {panel['title']}: {expr}")
    return checked, empty
