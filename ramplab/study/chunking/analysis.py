"""§4.3 Chunk size vs TTFT/TTLT: the sweep's table, the two-phase model fitted, the optimum.

The campaign (``campaigns/chunking.yaml``) sweeps ``workload.chunk_size`` × the target's
per-event sleep at a fixed, unsaturated rate and a fixed output length. This analysis tabulates
TTFT and TTLT (p50, p99) per chunk size and sleep, fits the two-phase model of
``chunking_model.py`` on the per-request records, reports every parameter with its 95 %
interval and the residuals, and computes the optimum chunk size for two stated objectives
(``chunking_optimum.py``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ramplab.errors import ModelError
from ramplab.experiment.study_result import StudyResult, StudyTable
from ramplab.study.chunking.charts import latency_chart, objective_chart, residual_chart
from ramplab.study.chunking.data import RunSettings, collect
from ramplab.study.chunking.model import StreamRows, TwoPhaseFit, event_name, fit_two_phase
from ramplab.study.chunking.optimum import DRAWS, Optimum, optimum

if TYPE_CHECKING:
    from ramplab.runs.manifest import Manifest

__all__ = ["analyse"]

TITLE = "§4.3 Chunk size vs TTFT/TTLT"
MEANING = {
    "t0_ms": "fixed start: send, queue, prefill, first byte back",
    "itl_ms": "τ, per output token",
    "startup_ms": "s, response start-up (first event of 1 token)",
    "tail_ms": "δ, last event over the first",
}


def analyse(directory: Path, manifest: Manifest) -> StudyResult:
    """The chunking study of an experiment directory (``study: chunking``)."""
    notes: list[str] = []
    rows, runs = collect(directory, notes)
    cells = _cells(rows, runs)
    if len(rows) == 0:
        return StudyResult("chunking", TITLE, [], notes=[*notes, "no measured request"])
    tokens = int(np.median(rows.tokens))
    if np.any(rows.tokens != tokens):
        notes.append(f"output lengths vary ({rows.tokens.min()}–{rows.tokens.max()} tokens)")
    fit: TwoPhaseFit | None
    try:
        fit = fit_two_phase(rows)
    except ModelError as exc:
        fit = None
        notes.append(f"no model fitted: {exc}")  # names the matrix
    charts = [latency_chart(cells, fit, tokens)]
    tables = [_measured_table(cells, fit, tokens)]
    conclusions: list[str] = []
    data: dict[str, Any] = {"tokens": tokens, "requests": len(rows), "runs": len(runs),
                            "cells": _cells_data(cells)}  # fmt: skip
    if fit is not None:
        optima = _optima(fit, tokens, runs)
        charts += [residual_chart(rows, fit, [r.chunk for r in runs]),
                   objective_chart(fit, tokens, optima)]  # fmt: skip
        tables += [_parameter_table(fit, runs), _residual_table(fit), _optimum_table(optima)]
        conclusions = _conclusions(fit, runs, tokens, optima)
        notes += _fit_notes(fit, runs)
        data |= {
            "parameters": {p.name: asdict(p) for p in fit.parameters},
            "dof": fit.dof,
            "residual_rms_ms": {"ttft": fit.residual_rms_ms[0], "ttlt": fit.residual_rms_ms[1]},
            "residual_max_ms": {"ttft": fit.residual_max_ms[0], "ttlt": fit.residual_max_ms[1]},
            "request_sd_ms": {"first": fit.request_sd_ms[0], "stream": fit.request_sd_ms[1]},
            "run_sd_ms": {"first": fit.run_sd_ms[0], "stream": fit.run_sd_ms[1]},
            "optima": [asdict(o) for o in optima],
        }
    late = [r.lateness_p99_ms for r in runs if r.lateness_p99_ms is not None]
    if late:
        notes.append(
            f"times are from the actual send; the generator's lateness p99 was at most "
            f"{max(late):.1f} ms in any run (the summary's TTFT/TTLT include it)"
        )
    return StudyResult("chunking", TITLE, conclusions, tables, charts, data, notes)


Cell = tuple[int, float, list[float], list[float]]


def _cells(rows: StreamRows, runs: list[RunSettings]) -> list[Cell]:
    """(chunk, sleep, TTFTs, TTLTs) per chunk size and sleep, repeats pooled."""
    pooled: dict[tuple[int, float], tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for run in runs:
        mask = rows.run == run.index
        ttft, ttlt = pooled[(run.chunk, run.sleep_ms)]
        ttft += rows.ttft_ms[mask].tolist()
        ttlt += rows.ttlt_ms[mask].tolist()
    return [(c, s, f, t) for (c, s), (f, t) in sorted(pooled.items(), key=lambda i: i[0][::-1])]


def _q(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 2) if values else None


def _cells_data(cells: list[Cell]) -> list[dict[str, Any]]:
    return [
        {"chunk": c, "sleep_ms": s, "requests": len(f), "ttft_p50_ms": _q(f, 50),
         "ttft_p99_ms": _q(f, 99), "ttlt_p50_ms": _q(t, 50), "ttlt_p99_ms": _q(t, 99)}
        for c, s, f, t in cells
    ]  # fmt: skip


def _measured_table(cells: list[Cell], fit: TwoPhaseFit | None, tokens: int) -> StudyTable:
    rows: list[list[Any]] = []
    for chunk, sleep, ttft, ttlt in cells:
        model = fit.predict(chunk, tokens, sleep) if fit is not None else None
        rows.append([
            chunk, sleep, len(ttft), _q(ttft, 50), _q(ttft, 99), _q(ttlt, 50), _q(ttlt, 99),
            round(float(np.mean(ttft)), 2) if ttft else None,
            round(model.ttft_ms, 2) if model else None,
            round(float(np.mean(ttlt)), 2) if ttlt else None,
            round(model.ttlt_ms, 2) if model else None,
        ])  # fmt: skip
    headers = ["chunk", "sleep ms", "requests", "TTFT p50 ms", "TTFT p99 ms", "TTLT p50 ms",
               "TTLT p99 ms", "TTFT mean ms", "model TTFT ms", "TTLT mean ms",
               "model TTLT ms"]  # fmt: skip
    return StudyTable("TTFT and TTLT per chunk size and sleep (from the send)", headers, rows)


def _configured(runs: list[RunSettings], name: str) -> float | None:
    if name == "itl_ms":
        values = {r.itl_ms for r in runs}
        return values.pop() if len(values) == 1 else None
    if name.startswith("event_ms[sleep="):
        return float(name.removeprefix("event_ms[sleep=").removesuffix("]"))
    return None


def _parameter_table(fit: TwoPhaseFit, runs: list[RunSettings]) -> StudyTable:
    rows: list[list[Any]] = []
    for p in fit.parameters:
        meaning = MEANING.get(p.name, "σ, per event (sleep + per-event overhead)")
        configured = _configured(runs, p.name)
        rows.append([p.name, meaning, round(p.value, 4), round(p.low, 4), round(p.high, 4),
                     configured, None if configured is None else ("yes" if p.covers(configured)
                                                                  else "no")])  # fmt: skip
    return StudyTable(
        f"Two-phase model: parameters ({fit.confidence:.0%} CI, t with {fit.dof} dof)",
        ["parameter", "meaning", "value ms", "CI low", "CI high", "configured", "inside CI"],
        rows,
    )


def _residual_table(fit: TwoPhaseFit) -> StudyTable:
    rows: list[list[Any]] = [
        [phase, round(fit.residual_rms_ms[i], 3), round(fit.residual_max_ms[i], 3),
         round(fit.request_sd_ms[i], 3), round(fit.run_sd_ms[i], 3)]
        for i, phase in enumerate(("TTFT (phase 1)", "TTLT (phase 1 + 2)"))
    ]  # fmt: skip
    rows[1][3:] = [f"{fit.request_sd_ms[1]:.3f} (phase 2)", f"{fit.run_sd_ms[1]:.3f} (phase 2)"]
    return StudyTable(
        f"Residuals (measured − model) over {fit.requests} requests",
        ["latency", "RMS ms", "max abs ms", "within-run SD ms", "run-to-run SD ms"],
        rows,
    )


def _optima(fit: TwoPhaseFit, tokens: int, runs: list[RunSettings]) -> list[Optimum]:
    budgets = {r.ttft_slo_ms for r in runs if r.ttft_slo_ms is not None}
    out = [optimum(fit, tokens, s, "sum") for s in fit.sleeps]
    if len(budgets) == 1:
        budget = budgets.pop()
        out += [optimum(fit, tokens, s, "ttlt_under_ttft", budget) for s in fit.sleeps]
    return out


def _optimum_table(optima: list[Optimum]) -> StudyTable:
    rows: list[list[Any]] = []
    for o in optima:
        goal = ("min TTFT + TTLT" if o.objective == "sum"
                else f"min TTLT, TTFT p99 ≤ {o.budget_ms:g} ms")  # fmt: skip
        rows.append([goal, o.sleep_ms, o.chunk, round(o.ttft_ms, 2), round(o.ttlt_ms, 2),
                     f"{o.low}–{o.high}", round(o.agreement, 3)])  # fmt: skip
    return StudyTable(
        f"Optimum chunk size from the model (95 % range over {DRAWS} parameter draws)",
        ["objective", "sleep ms", "chunk", "model TTFT ms", "model TTLT ms", "95 % range",
         "draws agreeing"],
        rows,
    )  # fmt: skip


def _conclusions(
    fit: TwoPhaseFit, runs: list[RunSettings], tokens: int, optima: list[Optimum]
) -> list[str]:
    tau = fit.parameter("itl_ms")
    itl = _configured(runs, "itl_ms")
    method = (f"weighted least squares on {fit.requests} requests of {len(runs)} runs, 95 % "
              f"t intervals with the run as the unit ({fit.dof} dof)")  # fmt: skip
    out = [
        f"Two-phase model TTFT = t0 + τ·(c' − 1), TTLT = TTFT + δ + τ·(N − c') + σ·(E − 1) "
        f"(c' tokens in the first event, E = ⌈N / c⌉ events), fitted by {method}: "
        f"τ = {tau.value:.3f} ms per token (95 % CI {tau.low:.3f}–{tau.high:.3f})"
        + (f", the configured latency.itl_ms {itl:g} ms "
           f"{'inside' if tau.covers(itl) else 'OUTSIDE'} the interval."
           if itl is not None else ".")
    ]  # fmt: skip
    for sleep in fit.sleeps:
        sigma = fit.parameter(event_name(sleep))
        inside = "inside" if sigma.covers(sleep) else "OUTSIDE"
        beyond = (
            "no per-event cost beyond the sleep is measurable: the target's absolute token "
            "deadlines absorb the write of each event"
            if sigma.covers(sleep)
            else f"{sigma.value - sleep:+.3f} ms per event beyond the sleep"
        )
        out.append(
            f"Each SSE event costs σ = {sigma.value:.3f} ms with event_sleep_ms {sleep:g} "
            f"(95 % CI {sigma.low:.3f}–{sigma.high:.3f}; the sleep {sleep:g} ms is {inside} "
            f"it): {beyond}."
        )
    for sleep in fit.sleeps:
        one, whole = fit.predict(1, tokens, sleep), fit.predict(tokens, tokens, sleep)
        out.append(
            f"Non-linear in the chunk size (model, N = {tokens} tokens, sleep {sleep:g} ms): "
            f"TTFT grows linearly from {one.ttft_ms:.1f} ms at chunk 1 to {whole.ttft_ms:.1f} ms "
            f"at chunk {tokens} (τ per token the first event waits for), while TTLT goes from "
            f"{one.ttlt_ms:.1f} to {whole.ttlt_ms:.1f} ms ({tokens} events down to 1, σ each, "
            "E = ⌈N / c⌉ falling hyperbolically)."
        )
    for o in optima:
        if o.chunk is None:
            out.append(
                f"No chunk size keeps the predicted TTFT p99 within {o.budget_ms:g} ms at sleep "
                f"{o.sleep_ms:g} ms."
            )
            continue
        goal = ("minimising the mean TTFT + TTLT" if o.objective == "sum" else
                f"minimising the mean TTLT with the predicted TTFT p99 ≤ {o.budget_ms:g} ms "
                "(the campaign's slo.ttft_ms; p99 = model mean + the residuals' 99th "
                "percentile)")  # fmt: skip
        out.append(
            f"Optimum chunk size {o.chunk} at event_sleep_ms {o.sleep_ms:g} for {goal}, "
            f"computed from the fitted model over chunk sizes 1–{tokens}: TTFT {o.ttft_ms:.1f} ms, "
            f"TTLT {o.ttlt_ms:.1f} ms; {o.low}–{o.high} over 95 % of {DRAWS} draws of the "
            f"parameters ({o.agreement:.0%} pick {o.chunk})."
        )
    out.append(
        f"Fit quality: residual RMS {fit.residual_rms_ms[0]:.2f} ms (TTFT) and "
        f"{fit.residual_rms_ms[1]:.2f} ms (TTLT), largest {fit.residual_max_ms[0]:.1f} / "
        f"{fit.residual_max_ms[1]:.1f} ms; run-to-run SD {fit.run_sd_ms[0]:.2f} ms (phase 1) "
        f"and {fit.run_sd_ms[1]:.2f} ms (phase 2), counted in the intervals."
    )
    return out


def _fit_notes(fit: TwoPhaseFit, runs: list[RunSettings]) -> list[str]:
    notes = []
    if any(r.slowdown_per_seq for r in runs) or any(r.slowdown_per_seq is None for r in runs):
        notes.append(
            "latency.slowdown_per_seq was not 0 (or not set) in some run: τ then includes the "
            "target's slowdown with concurrent sequences"
        )
    if any(r.itl_jitter_ms for r in runs):
        notes.append("itl_jitter_ms was not 0: jitter adds to the residuals")
    if fit.has("startup_ms") and fit.value("startup_ms") >= fit.value("itl_ms"):
        notes.append(
            "the start-up s is not below τ: max(τ·(c' − 1), s) is then not linear at c' = 2 and "
            "the model's first phase is approximate there"
        )
    return notes
