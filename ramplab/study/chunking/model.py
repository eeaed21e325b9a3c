"""§4.3's two-phase latency model of a chunked SSE stream, fitted by least squares.

How the reference target paces a stream (``target_service/generation.py``, ``inference.py``):
the first token is due when prefill ends; token ``j`` is due ``τ`` (``latency.itl_ms``) after
token ``j − 1``; an event carries ``c`` tokens (the chunk size) and leaves when its last token is
due; after every event the target sleeps ``σ`` (``stream.event_sleep_ms``) and shifts every later
deadline by it. Deadlines are absolute, so a late write delays only its own event. A request of
``N`` output tokens has ``E = ⌈N / c⌉`` events, the first carrying ``c' = min(c, N)`` tokens:

* phase 1, to the first event: ``TTFT = t0 + max(τ·(c' − 1), s)``
* phase 2, first → last event: ``D = δ + τ·(N − c') + σ·(E − 1) − (s when c' = 1)``

so ``TTLT = TTFT + D = t0 + δ + τ·(N − 1) + σ·(E − 1)``: the study's ``t0 + b·tokens +
c·events``. ``t0`` is the fixed start (send, queue, prefill, first byte back), ``s`` the response
start-up (headers and the role event: the first event cannot leave before them, which only shows
when its tokens are due at once, ``c' = 1``, as long as ``s < τ``), ``δ`` what the last event adds
over the first, ``σ`` the per-event cost — the sleep plus whatever per-event overhead is not
absorbed by the absolute deadlines — fitted once per sleep setting. A single-event stream has
``D = 0`` by definition and gives no phase-2 row.

Both phases are fitted together by weighted least squares on the per-request rows (TTFT and
``D`` of each request). The chunk size and the sleep are set per run, never within one, so the
run is the unit of replication: every row's error is a run's shift (variance ``u``) plus the
request's own (variance ``v``), per phase. ``v`` is the pooled within-run variance; ``u`` is
estimated by moments from the run means' residuals (leverage-corrected) and the weights are
iterated; the 95 % intervals use Student's t with (run means − parameters) degrees of freedom,
so a shared machine's run-to-run drift widens them instead of hiding in them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from ramplab.errors import ModelError

__all__ = [
    "FIRST",
    "STREAM",
    "ChunkPrediction",
    "Parameter",
    "StreamRows",
    "TwoPhaseFit",
    "event_name",
    "fit_two_phase",
    "model_row",
]

Floats = NDArray[np.float64]
Ints = NDArray[np.int64]

FIRST, STREAM = 0, 1  # the two phases, as row kinds
_ITERATIONS = 8


@dataclass(frozen=True)
class StreamRows:
    """Per-request observations: one entry per successful request, times in ms."""

    run: Ints  # the request's run (the unit of replication)
    sleep_ms: Floats  # the run's configured event sleep
    first_tokens: Ints  # c': tokens in the first content event
    events: Ints  # E: content events
    tokens: Ints  # N: output tokens
    ttft_ms: Floats
    ttlt_ms: Floats

    @classmethod
    def of(cls, rows: Sequence[tuple[int, float, int, int, int, float, float]]) -> StreamRows:
        """From ``(run, sleep_ms, first_tokens, events, tokens, ttft_ms, ttlt_ms)`` tuples."""
        cols = list(zip(*rows, strict=True)) if rows else [()] * 7
        ints = [np.asarray(cols[i], dtype=np.int64) for i in (0, 2, 3, 4)]
        floats = [np.asarray(cols[i], dtype=np.float64) for i in (1, 5, 6)]
        return cls(ints[0], floats[0], ints[1], ints[2], ints[3], floats[1], floats[2])

    def __len__(self) -> int:
        return len(self.run)


@dataclass(frozen=True)
class Parameter:
    name: str  # "t0_ms", "itl_ms", "startup_ms", "tail_ms", "event_ms[sleep=1]"
    value: float
    low: float
    high: float
    stderr: float

    def covers(self, value: float) -> bool:
        return self.low <= value <= self.high


@dataclass(frozen=True)
class ChunkPrediction:
    chunk: int
    ttft_ms: float
    ttlt_ms: float


@dataclass(frozen=True)
class TwoPhaseFit:
    """The fitted model: parameters with intervals, residuals, and predictions."""

    parameters: tuple[Parameter, ...]
    covariance: Floats
    sleeps: tuple[float, ...]  # the sleep settings with their own per-event cost
    confidence: float
    dof: int  # of the t quantile: run means − parameters
    cells: int  # run means (per run and phase) the fit stands on
    requests: int
    request_sd_ms: tuple[float, float]  # within-run SD per phase (v ** 0.5)
    run_sd_ms: tuple[float, float]  # run-to-run SD per phase (u ** 0.5)
    residual_rms_ms: tuple[float, float]  # per-request residuals per phase
    residual_max_ms: tuple[float, float]  # largest |residual| per phase
    residuals: dict[str, Floats] = field(repr=False)  # "ttft", "ttlt" per request (ms)

    def value(self, name: str) -> float:
        return self.parameter(name).value

    def parameter(self, name: str) -> Parameter:
        return next(p for p in self.parameters if p.name == name)

    def has(self, name: str) -> bool:
        return any(p.name == name for p in self.parameters)

    def vector(self) -> Floats:
        return np.array([p.value for p in self.parameters])

    def predict(
        self, chunk: int, tokens: int, sleep_ms: float, theta: Floats | None = None
    ) -> ChunkPrediction:
        """Mean TTFT and TTLT of a request of ``tokens`` at ``chunk`` and the given sleep."""
        beta = self.vector() if theta is None else theta
        names = [p.name for p in self.parameters]
        first, events = min(chunk, tokens), -(-tokens // chunk)
        ttft = float(model_row(names, FIRST, first, events, tokens, sleep_ms) @ beta)
        stream = (
            0.0
            if events == 1
            else float(model_row(names, STREAM, first, events, tokens, sleep_ms) @ beta)
        )
        return ChunkPrediction(chunk, ttft, ttft + stream)


def event_name(sleep_ms: float) -> str:
    return f"event_ms[sleep={sleep_ms:g}]"


def model_row(
    names: Sequence[str], kind: int, first: int, events: int, tokens: int, sleep_ms: float
) -> Floats:
    startup = 1.0 if first == 1 else 0.0
    if kind == FIRST:
        values = {"t0_ms": 1.0, "itl_ms": first - 1.0, "startup_ms": startup}
    else:
        values = {
            "itl_ms": float(tokens - first),
            "startup_ms": -startup,
            "tail_ms": 1.0,
            event_name(sleep_ms): events - 1.0,
        }
    return np.array([values.get(name, 0.0) for name in names])


def fit_two_phase(rows: StreamRows, confidence: float = 0.95) -> TwoPhaseFit:
    """Fit both phases on the per-request rows; ``ModelError`` when the sweep cannot."""
    if len(rows) == 0:
        raise ModelError("no successful request to fit")
    names = _columns(rows)
    kind, design, y, run = _stack(rows, names)
    # cells: one per (run, phase); every regressor is constant within one (chunk and sleep are
    # per run, N is fixed by max_tokens with ignore_eos) — checked, so means carry the fit.
    keys = run * 2 + kind
    cells, index, counts = np.unique(keys, return_inverse=True, return_counts=True)
    xc = np.zeros((len(cells), len(names)))
    yc = np.bincount(index, weights=y) / counts
    np.add.at(xc, index, design)
    xc /= counts[:, None]
    if not np.allclose(xc[index], design):
        raise ModelError("output length or chunk size varies within a run: the fit needs N fixed")
    ck = cells % 2
    if np.linalg.matrix_rank(xc) < len(names):
        raise ModelError(
            "the sweep does not separate the parameters "
            f"({', '.join(names)}): run at least three chunk sizes of which two give "
            "more than one event"
        )
    dof = len(cells) - len(names)
    if dof < 1:
        raise ModelError(f"{len(cells)} run means for {len(names)} parameters: add chunk sizes")
    within = y - yc[index]
    v = np.array([_pooled(within[kind == k], counts[ck == k]) for k in (FIRST, STREAM)])
    u = np.zeros(2)
    for _ in range(_ITERATIONS):
        var = u[ck] + v[ck] / counts
        w = 1.0 / np.maximum(var, 1e-12)
        xtwx = xc.T @ (w[:, None] * xc)
        cov = np.linalg.pinv(xtwx)
        beta = cov @ (xc.T @ (w * yc))
        resid = yc - xc @ beta
        hat = np.einsum("ij,jk,ik->i", xc, cov, xc) * w
        u = np.array([_between(resid, hat, v[k] / counts, ck == k) for k in (FIRST, STREAM)])
    q = stats.t.ppf(0.5 + confidence / 2, dof)
    se = np.sqrt(np.diag(cov))
    params = tuple(
        Parameter(n, float(b), float(b - q * s), float(b + q * s), float(s))
        for n, b, s in zip(names, beta, se, strict=True)
    )
    fitted = design @ beta
    r = y - fitted
    ttft_res = r[kind == FIRST]
    ttlt_res = ttft_res.copy()  # single-event streams: TTLT = TTFT
    stream_of = np.flatnonzero(rows.events > 1)
    ttlt_res[stream_of] += r[kind == STREAM]
    return TwoPhaseFit(
        parameters=params,
        covariance=cov,
        sleeps=tuple(sorted({float(s) for s in rows.sleep_ms[rows.events > 1]})),
        confidence=confidence,
        dof=dof,
        cells=len(cells),
        requests=len(rows),
        request_sd_ms=(float(np.sqrt(v[0])), float(np.sqrt(v[1]))),
        run_sd_ms=(float(np.sqrt(u[0])), float(np.sqrt(u[1]))),
        residual_rms_ms=(_rms(ttft_res), _rms(ttlt_res)),
        residual_max_ms=(_max(ttft_res), _max(ttlt_res)),
        residuals={"ttft": ttft_res, "ttlt": ttlt_res},
    )


def _columns(rows: StreamRows) -> list[str]:
    names = ["t0_ms", "itl_ms"]
    if np.any(rows.first_tokens == 1) and np.any(rows.first_tokens > 1):
        names.append("startup_ms")
    multi = rows.events > 1
    if np.any(multi):
        names.append("tail_ms")
        names += [event_name(s) for s in sorted({float(s) for s in rows.sleep_ms[multi]})]
    return names


def _stack(rows: StreamRows, names: list[str]) -> tuple[Ints, Floats, Floats, Ints]:
    kinds, design, y, run = [], [], [], []
    for i in range(len(rows)):
        first, events, tokens = int(rows.first_tokens[i]), int(rows.events[i]), int(rows.tokens[i])
        sleep = float(rows.sleep_ms[i])
        kinds.append(FIRST)
        design.append(model_row(names, FIRST, first, events, tokens, sleep))
        y.append(rows.ttft_ms[i])
        run.append(rows.run[i])
    for i in np.flatnonzero(rows.events > 1).tolist():
        first, events, tokens = int(rows.first_tokens[i]), int(rows.events[i]), int(rows.tokens[i])
        kinds.append(STREAM)
        design.append(model_row(names, STREAM, first, events, tokens, float(rows.sleep_ms[i])))
        y.append(rows.ttlt_ms[i] - rows.ttft_ms[i])
        run.append(rows.run[i])
    return (
        np.asarray(kinds, dtype=np.int64),
        np.vstack(design),
        np.asarray(y, dtype=np.float64),
        np.asarray(run, dtype=np.int64),
    )


def _pooled(within: Floats, counts: Ints) -> float:
    """Within-run variance of one phase, pooled over its runs."""
    dof = int(counts.sum() - len(counts))
    return float(within @ within / dof) if dof > 0 else 0.0


def _between(resid: Floats, hat: Floats, noise: Floats, mask: NDArray[np.bool_]) -> float:
    """Run-to-run variance of one phase by moments: E[r²] ≈ (1 − h)·(u + v/n)."""
    free = float(np.sum(1.0 - hat[mask]))
    if free <= 0:
        return 0.0
    excess = float(np.sum(resid[mask] ** 2 - (1.0 - hat[mask]) * noise[mask]))
    return max(0.0, excess / free)


def _rms(values: Floats) -> float:
    return float(np.sqrt(np.mean(values**2))) if len(values) else 0.0


def _max(values: Floats) -> float:
    return float(np.max(np.abs(values))) if len(values) else 0.0
