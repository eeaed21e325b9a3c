"""The ramplab tab in Locust's web UI: each step as the master sees it so far.

Locust's UI shows its own request table (where ramplab's TTFT and TTLT have rows of their own)
and lets a plugin add tabs: ``extended_tabs``/``extended_tables`` in the page's template
arguments name a tab and its columns, and the UI reads the tab's rows from the
``extended_stats`` of each ``/stats/requests`` answer. One row per step, from what the master
holds (``MasterEngine``: the workers' last progress reports and the merged sketches) — the same
sources as ``progress.json``, so the figures are live and approximate; ``summary.json`` is the
measurement:

- the target rate (closed loop: users) and the rate achieved so far: arrivals dispatched ÷ the
  measured time elapsed;
- requests in flight (the workers' in-flight lists) and arrivals dropped;
- TTFT, ITL and TPOT p50/p99 within 1 % (``metrics/live.py``);
- the verdict so far: the share of finished requests that met the SLO (with ``--ramplab-slo``),
  and the generator's self-check (``results/selfcheck.py``, its CPU rule: the lateness rule needs
  every record and waits for the summary).
"""

from __future__ import annotations

import json
import time
from typing import Any

from ramplab.load.shapes import Stage
from ramplab.plugin.master import MasterEngine
from ramplab.results.selfcheck import health_from_reports, judge

__all__ = ["TAB", "install_tab", "rows"]

TAB = "ramplab"
COLUMNS = (
    ("step", "step"), ("state", "state"), ("target", "target"), ("achieved", "achieved QPS"),
    ("in_flight", "in flight"), ("dropped", "dropped"),
    ("ttft_p50", "TTFT p50 ms"), ("ttft_p99", "TTFT p99 ms"),
    ("itl_p50", "ITL p50 ms"), ("itl_p99", "ITL p99 ms"),
    ("tpot_p50", "TPOT p50 ms"), ("tpot_p99", "TPOT p99 ms"),
    ("slo_met", "SLO met"), ("generator", "generator"),
)  # fmt: skip


def _state(stage: Stage, elapsed: float) -> str:
    if elapsed < stage.start_s:
        return "pending"
    if elapsed < stage.measured_start_s:
        return "warm-up"
    return "running" if elapsed < stage.end_s else "done"


def _per_stage(reports: list[dict[str, Any]], key: str, stages: int) -> list[int]:
    """Σ over the workers' reports of a per-stage count (a worker without the plan: none)."""
    total = [0] * stages
    for report in reports:
        for index, value in enumerate(list(report.get(key) or ())[:stages]):
            total[index] += int(value)
    return total


def _ms(value: float | int | None) -> float | None:
    return None if value is None else round(float(value), 1)


def rows(engine: MasterEngine, now: float | None = None) -> list[dict[str, Any]]:
    """One row per step of the run, as it stands at ``now`` (epoch seconds)."""
    plan = engine.plan
    stages = engine.shape.stages
    if plan is None:
        return []
    elapsed = (now or time.time()) - plan.start_epoch
    # Every worker's counts (a worker gone keeps what it did), the live ones' flights.
    reports = [report for _, report in sorted(engine.progress.items())]
    live = set(engine.live_workers())
    dispatched = _per_stage(reports, "dispatched", len(stages))
    dropped = _per_stage(reports, "dropped", len(stages))
    finished = _per_stage(reports, "finished", len(stages))
    good = _per_stage(reports, "good", len(stages))
    in_flight = [0] * len(stages)
    flights = [f for w, r in engine.progress.items() if w in live for f in r.get("in_flight") or ()]
    for flight in flights:
        if flight.get("step") is not None and 0 <= int(flight["step"]) < len(stages):
            in_flight[int(flight["step"])] += 1
    health = health_from_reports(engine.progress, len(stages))
    figures = engine.live.snapshot()
    closed = engine.options.mode == "closed"
    slo = engine.options.slo
    out = []
    for stage in stages:
        index = stage.index
        measured = min(elapsed, stage.end_s) - stage.measured_start_s
        shown = figures.get(str(index)) or {}
        bound, reason = judge(health[index] if health is not None else None, None)
        row: dict[str, Any] = {
            "step": index,
            "state": _state(stage, elapsed),
            "target": f"{stage.rate:g} users" if closed else f"{stage.rate:g} QPS",
            "achieved": round(dispatched[index] / measured, 2) if measured >= 1.0 else None,
            "in_flight": in_flight[index],
            "dropped": dropped[index],
            "slo_met": (
                f"{good[index] / finished[index]:.1%}"
                if finished[index] and not slo.empty
                else None
            ),
            "generator": None if bound is None else (f"starved: {reason}" if bound else "ok"),
        }
        for figure, key in (("ttft_ms", "ttft"), ("itl_ms", "itl"), ("tpot_ms", "tpot")):
            values = shown.get(figure) or {}
            row[f"{key}_p50"] = _ms(values.get("p50"))
            row[f"{key}_p99"] = _ms(values.get("p99"))
        out.append(row)
    return out


def install_tab(web_ui: Any, engine: MasterEngine) -> None:
    """Add the tab to a Locust ``WebUI`` (its Flask app and template arguments)."""
    from flask import Response, request  # Locust's own web framework; loaded with the UI

    web_ui.template_args["extended_tabs"] = [{"title": "ramplab", "key": TAB}]
    web_ui.template_args["extended_tables"] = [
        {"key": TAB, "structure": [{"key": key, "title": title} for key, title in COLUMNS]}
    ]

    @web_ui.app.after_request  # type: ignore[untyped-decorator]
    def add_rows(response: Response) -> Response:
        if request.path != "/stats/requests" or not response.is_json:
            return response
        data = response.get_json()
        data["extended_stats"] = [{"key": TAB, "data": rows(engine)}]
        response.set_data(json.dumps(data))
        return response
