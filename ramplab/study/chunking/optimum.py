"""The chunk size a stated objective prefers, computed from the fitted two-phase model.

Objectives (every integer chunk size from 1 to the output length is a candidate):

* ``sum``: minimise the mean TTFT + TTLT — the first token and the last count alike. TTFT grows
  by ``τ`` per token the first event waits for, TTLT falls by ``σ`` per event saved, and
  ``E = ⌈N / c⌉``, so with a sleep the optimum is near ``√(σ·N / τ)``;
* ``ttlt_under_ttft``: minimise the mean TTLT while the predicted TTFT p99 (the model's mean plus
  the 99th percentile of the TTFT residuals) stays within a budget, the campaign's
  ``slo.ttft_ms``; ties go to the smaller chunk.

The uncertainty of the answer: the optimum is recomputed for parameter vectors drawn from the
fit's covariance (scaled so the draws' marginal intervals are the fit's t intervals); the 95 %
range of those optima is reported with the share of draws that agree with the point answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats

from ramplab.study.chunking.model import FIRST, STREAM, Floats, TwoPhaseFit, model_row

__all__ = ["Objective", "Optimum", "optimum"]

Objective = Literal["sum", "ttlt_under_ttft"]
DRAWS = 4000


@dataclass(frozen=True)
class Optimum:
    objective: Objective
    sleep_ms: float
    tokens: int
    chunk: int | None  # None: no chunk size meets the constraint
    ttft_ms: float
    ttlt_ms: float
    low: int  # 2.5 % and 97.5 % of the draws' optima
    high: int
    agreement: float  # share of the draws whose optimum is ``chunk``
    budget_ms: float | None = None  # the TTFT p99 budget of ``ttlt_under_ttft``


def _matrices(fit: TwoPhaseFit, tokens: int, sleep_ms: float) -> tuple[Floats, Floats]:
    names = [p.name for p in fit.parameters]
    first_rows, stream_rows = [], []
    for chunk in range(1, tokens + 1):
        first, events = min(chunk, tokens), -(-tokens // chunk)
        first_rows.append(model_row(names, FIRST, first, events, tokens, sleep_ms))
        stream = model_row(names, STREAM, first, events, tokens, sleep_ms)
        stream_rows.append(stream if events > 1 else np.zeros(len(names)))
    ttft = np.vstack(first_rows)
    return ttft, ttft + np.vstack(stream_rows)


def _draws(fit: TwoPhaseFit, seed: int) -> Floats:
    scale = stats.t.ppf(0.5 + fit.confidence / 2, fit.dof) / stats.norm.ppf(
        0.5 + fit.confidence / 2
    )
    rng = np.random.default_rng(seed)
    draws = rng.multivariate_normal(fit.vector(), fit.covariance * scale**2, size=DRAWS)
    theta: Floats = np.vstack([fit.vector(), draws]).T  # column 0: the point estimate
    return theta


def _choose(ttft: Floats, ttlt: Floats, objective: Objective, budget: float | None) -> Floats:
    """The 1-based optimum per column (``nan`` where none is allowed); equal costs (to a
    nanosecond: float sums of the same model differ in the last bits) go to the smaller chunk."""
    ttft, ttlt = np.round(ttft, 6), np.round(ttlt, 6)
    best: Floats
    if objective == "sum":
        best = np.argmin(ttft + ttlt, axis=0).astype(np.float64) + 1
        return best
    assert budget is not None
    masked = np.where(ttft <= budget, ttlt, np.inf)
    best = np.argmin(masked, axis=0).astype(np.float64) + 1
    best[~np.isfinite(masked.min(axis=0))] = np.nan
    return best


def optimum(
    fit: TwoPhaseFit,
    tokens: int,
    sleep_ms: float,
    objective: Objective = "sum",
    budget_ms: float | None = None,
    seed: int = 0,
) -> Optimum:
    """The optimum chunk size for ``tokens`` output tokens at ``sleep_ms``, with its range."""
    first, last = _matrices(fit, tokens, sleep_ms)
    theta = _draws(fit, seed)
    ttft, ttlt = first @ theta, last @ theta
    p99_offset = float(np.percentile(fit.residuals["ttft"], 99)) if objective != "sum" else 0.0
    budget = None if budget_ms is None else budget_ms - p99_offset
    chosen = _choose(ttft, ttlt, objective, budget)
    point = chosen[0]
    others = chosen[1:][np.isfinite(chosen[1:])]
    low, high = np.percentile(others, [2.5, 97.5]) if len(others) else (np.nan, np.nan)
    if not np.isfinite(point):
        return Optimum(objective, sleep_ms, tokens, None, np.nan, np.nan, 0, 0, 0.0, budget_ms)
    chunk = int(point)
    return Optimum(
        objective=objective,
        sleep_ms=sleep_ms,
        tokens=tokens,
        chunk=chunk,
        ttft_ms=float(ttft[chunk - 1, 0]),
        ttlt_ms=float(ttlt[chunk - 1, 0]),
        low=int(low) if np.isfinite(low) else chunk,
        high=int(np.ceil(high)) if np.isfinite(high) else chunk,
        agreement=float(np.mean(chosen[1:] == chunk)),
        budget_ms=budget_ms,
    )
