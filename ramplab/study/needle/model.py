"""§3.2's numbers: the grid's cells, the fit of TTFT against context length, the prefill model.

The reference target's prefill for ``P`` prompt tokens of which ``C`` are in its prefix cache
(``target_service/inference.py``, duplicated here on purpose: ramplab never imports the target)::

    prefill = overhead + (P − C) × per_token + C × cached_per_token + (P² − C²) × per_token_sq

TTFT measured by the client adds what is not prefill — the request's trip, the server's
tokenisation and parsing of a long body, the first event's trip back — so the fit
``TTFT = a + b·P + c·P²`` by ordinary least squares over every request without a cached prefix
should find ``b`` and ``c`` near the configured ``per_token`` and ``per_token_sq`` (``a`` above
``overhead``, and ``b`` a little above ``per_token`` when the per-token work outside the model —
tokenising, JSON — is not negligible). The intervals are 95 % Student-t intervals from the
residual variance; the linear fit ``a + b·P`` is reported beside it so a reader sees what the
quadratic term explains. ``P`` is scaled to thousands of tokens inside the fit (``P²`` reaches
1.6·10¹⁰ at 128K: unscaled, the normal equations lose most of their digits).

A needle at token ``position`` of a shared haystack leaves whole blocks before it in the cache:
``C = ⌊position / B⌋ × B``, at most ``⌊(P − 1) / B⌋ × B`` (``target_service/prefix_cache.py``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

__all__ = ["Cell", "Fit", "PrefillModel", "Row", "cells", "expected_cached", "fit_ttft"]


@dataclass(frozen=True, slots=True)
class Row:
    """One successful request of the grid."""

    length: int  # prompt tokens of the cell
    depth: float  # 0 … 1
    position: int  # haystack tokens before the needle
    ttft_ms: float
    ttlt_ms: float
    ttft_send_ms: float
    cached_tokens: int | None = None  # as the server reported, when it did


@dataclass(frozen=True, slots=True)
class Cell:
    length: int
    depth: float
    count: int
    ttft_ms: float  # median
    ttlt_ms: float  # median
    cached_tokens: float | None  # mean of what the server reported; None when it did not


def cells(rows: Iterable[Row]) -> dict[tuple[int, float], Cell]:
    """Median TTFT and TTLT (and mean reported cached tokens) of each (length, depth)."""
    grouped: dict[tuple[int, float], list[Row]] = defaultdict(list)
    for row in rows:
        grouped[row.length, row.depth].append(row)
    out: dict[tuple[int, float], Cell] = {}
    for key in sorted(grouped):
        group = grouped[key]
        cached = [r.cached_tokens for r in group if r.cached_tokens is not None]
        out[key] = Cell(
            key[0],
            key[1],
            len(group),
            float(np.median([r.ttft_ms for r in group])),
            float(np.median([r.ttlt_ms for r in group])),
            float(np.mean(cached)) if cached else None,
        )
    return out


@dataclass(frozen=True, slots=True)
class PrefillModel:
    overhead_ms: float
    per_token_ms: float
    per_token_sq_ms: float
    cached_per_token_ms: float = 0.0

    @classmethod
    def from_settings(cls, latency: Mapping[str, Any]) -> PrefillModel:
        """From a campaign's ``target.settings.latency`` (the target's defaults where absent)."""
        return cls(
            float(latency.get("prefill_overhead_ms", 20.0)),
            float(latency.get("prefill_per_token_ms", 0.05)),
            float(latency.get("prefill_per_token_sq_ms", 0.0)),
            float(latency.get("prefill_cached_per_token_ms", 0.0)),
        )

    def prefill_ms(self, tokens: float, cached: float = 0.0) -> float:
        return (
            self.overhead_ms
            + (tokens - cached) * self.per_token_ms
            + cached * self.cached_per_token_ms
            + (tokens * tokens - cached * cached) * self.per_token_sq_ms
        )


def expected_cached(position: int, length: int, block: int) -> int:
    """Tokens a warm prefix cache holds before a needle at ``position`` (whole blocks)."""
    return min(position // block * block, max(0, (length - 1) // block * block))


@dataclass(frozen=True, slots=True)
class Fit:
    """``TTFT = intercept + per_token·P + per_token_sq·P²`` (ms, tokens), with 95 % half-widths,
    and the linear fit's coefficients and residual error beside it."""

    n: int
    intercept_ms: float
    per_token_ms: float
    per_token_sq_ms: float
    intercept_half_ms: float
    per_token_half_ms: float
    per_token_sq_half_ms: float
    rmse_ms: float
    linear_intercept_ms: float
    linear_per_token_ms: float
    linear_rmse_ms: float

    def predict(self, tokens: float) -> float:
        return self.intercept_ms + self.per_token_ms * tokens + self.per_token_sq_ms * tokens**2


def _ols(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    residual = y - x @ coef
    dof = len(y) - x.shape[1]
    variance = float(residual @ residual) / dof if dof > 0 else math.nan
    cov = variance * np.linalg.pinv(x.T @ x)
    rmse = math.sqrt(float(residual @ residual) / len(y))
    return coef, np.sqrt(np.clip(np.diag(cov), 0.0, None)), rmse


def fit_ttft(tokens: Sequence[float], ttft_ms: Sequence[float]) -> Fit | None:
    """The quadratic and linear least-squares fits; ``None`` with fewer than three distinct
    lengths or four requests (the quadratic has three parameters and needs a residual)."""
    p = np.asarray(tokens, dtype=np.float64)
    y = np.asarray(ttft_ms, dtype=np.float64)
    if len(np.unique(p)) < 3 or len(p) < 4:
        return None
    k = p / 1000.0
    quad, se, rmse = _ols(np.column_stack([np.ones_like(k), k, k * k]), y)
    lin, _, lin_rmse = _ols(np.column_stack([np.ones_like(k), k]), y)
    t = float(stats.t.ppf(0.975, len(p) - 3))
    return Fit(
        n=len(p),
        intercept_ms=float(quad[0]),
        per_token_ms=float(quad[1]) / 1e3,
        per_token_sq_ms=float(quad[2]) / 1e6,
        intercept_half_ms=t * float(se[0]),
        per_token_half_ms=t * float(se[1]) / 1e3,
        per_token_sq_half_ms=t * float(se[2]) / 1e6,
        rmse_ms=rmse,
        linear_intercept_ms=float(lin[0]),
        linear_per_token_ms=float(lin[1]) / 1e3,
        linear_rmse_ms=lin_rmse,
    )
