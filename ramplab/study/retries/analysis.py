"""§4.4 Retries and goodput: each retry policy against each fault scenario, measured and modelled.

``campaigns/retries.yaml`` runs every policy ``ramplab/retry/config.py`` accepts (none, fixed,
exponential, full / equal / decorrelated jitter, Retry-After aware, a retry budget, SRE adaptive
throttling) against seeded random 429s with ``Retry-After``, a 503 outage window set at a known
run time, and overload shedding. Per cell: goodput, retry amplification (attempts ÷ requests),
success ratio and, after the outage, the time to recover (``summary.json``'s
``outage.recovery_s``) — each next to the model's figure (``retries_cells.predict``), the
difference and what explains it. The conclusion names, per scenario, the policy with the best
goodput and what it cost in amplification.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ramplab.experiment.sources import expand
from ramplab.experiment.study_result import StudyResult, StudyTable
from ramplab.runs.rundir import RunDir
from ramplab.study.retries.cells import (
    Cell,
    Inputs,
    measure_run,
    policy_label,
    predict,
    scenario_of,
)
from ramplab.study.retries.charts import charts

if TYPE_CHECKING:
    from ramplab.runs.manifest import Manifest

__all__ = ["analyse"]

TITLE = "§4.4 Retries and goodput"
_MEASURED = ("goodput_qps", "goodput_ratio", "success_ratio", "retry_amplification")


def analyse(directory: Path, manifest: Manifest) -> StudyResult:
    notes: list[str] = []
    cells = []
    for group in expand([directory], notes):
        cell = _cell(group.name, [(r.path, r.summary) for r in group.runs], notes)
        if cell is not None:
            cells.append(cell)
    if not cells:
        return StudyResult("retries", TITLE, [], notes=[*notes, "no finished run to analyse"])
    for cell in cells:
        cell.explanation = _explain(cell)
    best = _best(cells)
    return StudyResult(
        study="retries",
        title=TITLE,
        conclusions=_conclusions(cells, best),
        tables=[_table(cells)],
        charts=charts(cells),
        data={"cells": [c.to_json() for c in cells], "best": best, "fit": _fit(cells)},
        notes=notes,
    )


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None and not math.isnan(v)]
    return sum(present) / len(present) if present else None


def _cell(name: str, runs: list[tuple[Path, dict[str, Any]]], notes: list[str]) -> Cell | None:
    measured: dict[str, list[float | None]] = defaultdict(list)
    models: dict[str, list[float | None]] = defaultdict(list)
    cell: Cell | None = None
    for path, summary in runs:
        campaign = yaml.safe_load((RunDir(path).campaign).read_text(encoding="utf-8")) or {}
        if not summary.get("requests"):
            notes.append(f"{name}: {path.name} has no request in its measured window")
            continue
        inputs: Inputs = measure_run(path, summary)
        if cell is None:
            cell = Cell(scenario_of(campaign), policy_label(campaign.get("retry")), name, 0, 0.0)
        cell.runs += 1
        cell.requests += summary["requests"]
        for key in _MEASURED:
            measured[key].append(summary.get(key))
        measured["measured_s"].append(summary.get("measured_s"))
        measured["recovery_s"].append((summary.get("outage") or {}).get("recovery_s"))
        measured["p_first"].append(inputs.p_first)
        measured["p_retry"].append(inputs.p_retry)
        measured["drain_s"].append(inputs.drain_s)
        measured["service_ms"].append(inputs.service_s * 1000)
        single = Cell(cell.scenario, cell.policy, name, 1, float(summary["requests"]))
        predict(single, campaign, summary, inputs, seed=int(campaign.get("seed", 1)))
        cell.method = single.method
        for key, value in single.model.items():
            models[key].append(value)
    if cell is None:
        return None
    cell.requests /= cell.runs
    cell.measured = {k: _mean(v) for k, v in measured.items()}
    cell.model = {k: _mean(v) for k, v in models.items()}
    return cell


def _diff(cell: Cell, key: str, model_key: str) -> float | None:
    m, p = cell.measured.get(key), cell.model.get(model_key)
    return None if m is None or p is None else m - p


def _explain(cell: Cell) -> str:
    """Why the measured amplification differs from the model's, from what the run measured."""
    d = _diff(cell, "retry_amplification", "amplification")
    err = cell.model.get("amplification_error") or 0.0
    if d is None:
        return "no figure to compare"
    within = abs(d) <= err
    first, retry = cell.measured.get("p_first"), cell.measured.get("p_retry")
    parts = [f"ΔA {d:+.3f} {'within' if within else 'beyond'} ±{err:.3f} (3σ sampling)"]
    p = cell.model.get("fault_ratio")
    if cell.scenario == "shed" and first is not None and p is not None:
        parts.append(f"model p {p:.3f} vs first attempts refused {first:.3f}")
        if retry is not None and retry > first + 0.05:
            parts.append(f"retries refused {retry:.3f}: they land on a still-full queue")
    elif cell.scenario.startswith("random") and first is not None and p is not None:
        parts.append(f"drawn fault ratio {first:.3f} vs configured {p:.3f}")
    if (cell.model.get("goodput_ratio_spread") or 0.0) > 0.3 and "throttle" in cell.policy:
        parts.append(
            "the seeded replays split (goodput ratio spread "
            f"{cell.model['goodput_ratio_spread']:.2f}): on a cold window one early refusal "
            "makes p_reject ½ and every local rejection raises it, so some replays lock out"
        )
    if cell.scenario == "outage":
        drain, model_drain = cell.measured.get("drain_s"), cell.model.get("drain_s")
        if drain is not None and model_drain is not None:
            parts.append(
                f"last caught chain ends {drain:.2f} s after the window (model {model_drain:.2f} s)"
            )
        if "throttle" in cell.policy:
            parts.append("the throttle's window still holds the outage's refusals afterwards")
    return "; ".join(parts)


def _best(cells: list[Cell]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for scenario in dict.fromkeys(c.scenario for c in cells):
        mine = [
            c for c in cells if c.scenario == scenario and c.measured.get("goodput_qps") is not None
        ]
        if not mine:
            continue
        top = max(mine, key=lambda c: c.measured["goodput_qps"] or 0.0)
        # One request more or less over the measured window: differences below it are noise.
        step = 1 / (top.measured.get("measured_s") or math.inf)
        best = top.measured["goodput_qps"] or 0.0
        ties = [
            c.policy
            for c in mine
            if c is not top and (c.measured["goodput_qps"] or 0.0) >= best - step
        ]
        model_top = max(mine, key=lambda c: c.model.get("goodput_qps") or 0.0)
        out[scenario] = {
            "policy": top.policy,
            "goodput_qps": top.measured["goodput_qps"],
            "amplification": top.measured["retry_amplification"],
            "model_goodput_qps": top.model.get("goodput_qps"),
            "model_amplification": top.model.get("amplification"),
            "model_best_policy": model_top.policy,
            "within_one_request": ties,
            "one_request_qps": step,
        }
    return out


def _fit(cells: list[Cell]) -> dict[str, int]:
    n = within = 0
    for c in cells:
        d, err = (
            _diff(c, "retry_amplification", "amplification"),
            c.model.get("amplification_error"),
        )
        if d is not None and err is not None:
            n += 1
            within += abs(d) <= err
    return {"cells": n, "amplification_within_error": within}


def _f(value: float | None, digits: int = 3) -> float | None:
    return None if value is None or math.isnan(value) else round(value, digits)


def _table(cells: list[Cell]) -> StudyTable:
    headers = [
        "scenario", "policy", "requests",
        "goodput QPS", "model", "success", "model",
        "amplification", "model", "± model error",
        "recovery s", "model", "method", "difference explained",
    ]  # fmt: skip
    rows: list[list[Any]] = []
    for c in cells:
        m, p = c.measured, c.model
        rows.append([
            c.scenario, c.policy, round(c.requests),
            _f(m.get("goodput_qps"), 2), _f(p.get("goodput_qps"), 2),
            _f(m.get("success_ratio")), _f(p.get("success")),
            _f(m.get("retry_amplification")), _f(p.get("amplification")),
            _f(p.get("amplification_error")),
            _f(m.get("recovery_s"), 2), _f(p.get("recovery_s"), 2),
            c.method, c.explanation,
        ])  # fmt: skip
    return StudyTable("Goodput, success and retry amplification: measured vs model", headers, rows)


def _conclusions(cells: list[Cell], best: dict[str, dict[str, Any]]) -> list[str]:
    out = []
    for scenario, b in best.items():
        none = next((c for c in cells if c.scenario == scenario and c.policy == "none"), None)
        base = ""
        if none is not None and none.measured.get("goodput_qps") is not None:
            base = (
                f"; without retries {none.measured['goodput_qps']:.2f} QPS "
                f"(success {none.measured['success_ratio']:.3f})"
            )
        agree = (
            "the model ranks it first too"
            if b["model_best_policy"] == b["policy"]
            else f"the model would rank {b['model_best_policy']} first"
        )
        tied = ""
        if b["within_one_request"]:
            tied = (
                f" (within one request, {b['one_request_qps']:.2g} QPS, of it: "
                f"{', '.join(b['within_one_request'])})"
            )
        out.append(
            f"{scenario}: best goodput with {b['policy']}{tied}, {b['goodput_qps']:.2f} QPS "
            "(goodput_qps of summary.json, requests meeting the campaign's SLO per second) at "
            f"retry amplification {b['amplification']:.3f} attempts per request (model "
            f"{_num(b['model_goodput_qps'])} QPS at {_num(b['model_amplification'])})"
            f"{base}; {agree}."
        )
    fit = _fit(cells)
    out.append(
        f"Model fit: in {fit['amplification_within_error']} of {fit['cells']} cells the measured "
        "amplification lies within the model's stated error (3 standard errors of the mean "
        "attempts per request over the cell's requests); the table gives each difference and what "
        "the run measured that explains it."
    )
    outage = [
        c for c in cells if c.scenario == "outage" and c.measured.get("recovery_s") is not None
    ]
    if outage:
        slow = max(outage, key=lambda c: c.measured["recovery_s"] or 0.0)
        fast = min(outage, key=lambda c: c.measured["recovery_s"] or 0.0)
        out.append(
            f"outage: recovery (outage.recovery_s, first 1-s window by intended start with ≥ 95 % "
            f"of requests good) from {fast.measured['recovery_s']:.2f} s ({fast.policy}) to "
            f"{slow.measured['recovery_s']:.2f} s ({slow.policy}); model "
            f"{_num(fast.model.get('recovery_s'))} s and {_num(slow.model.get('recovery_s'))} s "
            "from the window, the back-off schedule and a fluid queue of the target's slots."
        )
    never = [
        c.policy for c in cells if c.scenario == "outage" and c.measured.get("recovery_s") is None
    ]
    if never:
        out.append(f"outage: no recovery within the run with {', '.join(never)}.")
    return out


def _num(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.3g}"
